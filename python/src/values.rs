//! Values of the Postgres session in both directions.
//!
//! Parameters: `None`, `bool`, `int` (beyond 64 bits as numeric text), `float`, `str`,
//! `bytes`/`bytearray`/`memoryview` (to `bytea` only), `datetime.datetime` (an aware one is
//! sent as an instant in UTC, a naive one as a wall-clock reading), `datetime.date`,
//! `datetime.time`, `decimal.Decimal`, `uuid.UUID`, and `dict`/`list` as JSON.
//!
//! Columns: `NULL` to `None`, booleans, integers, floats, text, `bytea` to `bytes`, `json` and
//! `jsonb` to `dict`/`list`/..., `timestamptz` to an aware `datetime` in UTC, `timestamp` to a
//! naive one, `numeric` to `decimal.Decimal`, `date`/`time` to `datetime.date`/`time`, `uuid`
//! to `uuid.UUID`.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDate, PyDateAccess, PyDateTime, PyDelta, PyDeltaAccess, PyDict,
    PyFloat, PyInt, PyList, PyMemoryView, PyString, PyTime, PyTimeAccess, PyTuple, PyTzInfo,
};
use pyo3::PyTypeInfo;

use writerlock::calendar::{civil_from_days, days_from_civil};
use writerlock::pg::{Column, Value};

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// Microseconds since 1970-01-01 of a datetime's reading, and whether it is aware (then the
/// result is UTC).
fn datetime_micros(dt: &Bound<'_, PyDateTime>) -> PyResult<(i64, bool)> {
    let days = days_from_civil(
        i64::from(dt.get_year()),
        u32::from(dt.get_month()),
        u32::from(dt.get_day()),
    );
    let mut micros = days * MICROS_PER_DAY
        + (i64::from(dt.get_hour()) * 3600
            + i64::from(dt.get_minute()) * 60
            + i64::from(dt.get_second()))
            * 1_000_000
        + i64::from(dt.get_microsecond());
    let offset = dt.call_method0(intern!(dt.py(), "utcoffset"))?;
    if offset.is_none() {
        return Ok((micros, false));
    }
    let offset = offset.cast_into::<PyDelta>()?;
    micros -= i64::from(offset.get_days()) * MICROS_PER_DAY
        + i64::from(offset.get_seconds()) * 1_000_000
        + i64::from(offset.get_microseconds());
    Ok((micros, true))
}

fn describe_type(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_string())
}

/// Converts one parameter (`index` from 1) to a [`Value`].
pub fn to_value(value: &Bound<'_, PyAny>, index: usize) -> PyResult<Value> {
    let py = value.py();
    if value.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if value.is_instance_of::<PyInt>() {
        return Ok(match value.extract::<i64>() {
            Ok(v) => Value::Int(v),
            Err(_) => Value::Numeric(value.str()?.to_string()),
        });
    }
    if let Ok(f) = value.cast::<PyFloat>() {
        return Ok(Value::Float(f.value()));
    }
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(Value::Text(s.to_cow()?.into_owned()));
    }
    if let Ok(b) = value.cast::<PyBytes>() {
        return Ok(Value::Bytes(b.as_bytes().to_vec()));
    }
    if let Ok(b) = value.cast::<PyByteArray>() {
        return Ok(Value::Bytes(b.to_vec()));
    }
    if value.is_instance_of::<PyMemoryView>() {
        let bytes = PyBytes::type_object(py).call1((value,))?;
        return Ok(Value::Bytes(bytes.cast::<PyBytes>()?.as_bytes().to_vec()));
    }
    if let Ok(dt) = value.cast::<PyDateTime>() {
        let (micros, time_zone) = datetime_micros(dt)?;
        return Ok(Value::Timestamp { micros, time_zone });
    }
    if value.is_instance_of::<PyDate>() || value.is_instance_of::<PyTime>() {
        return Ok(Value::Text(
            value.call_method0(intern!(py, "isoformat"))?.extract()?,
        ));
    }
    if value.is_instance_of::<PyDict>() || value.is_instance_of::<PyList>() {
        let json = py.import(intern!(py, "json"))?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("allow_nan", false)?;
        let text: String = json
            .getattr(intern!(py, "dumps"))?
            .call((value,), Some(&kwargs))
            .map_err(|e| {
                PyValueError::new_err(format!(
                    "parameter {index} cannot be sent as JSON: {}",
                    e.value(py)
                ))
            })?
            .extract()?;
        let parsed = serde_json::from_str(&text).map_err(|e| {
            PyValueError::new_err(format!("parameter {index} cannot be sent as JSON: {e}"))
        })?;
        return Ok(Value::Json(parsed));
    }
    let decimal = py.import(intern!(py, "decimal"))?.getattr("Decimal")?;
    if value.is_instance(&decimal)? {
        if value.call_method0("is_snan")?.is_truthy()? {
            return Err(PyValueError::new_err(format!(
                "parameter {index} is a signalling NaN, which Postgres cannot store"
            )));
        }
        return Ok(Value::Numeric(value.str()?.to_string()));
    }
    let uuid = py.import(intern!(py, "uuid"))?.getattr("UUID")?;
    if value.is_instance(&uuid)? {
        return Ok(Value::Text(value.str()?.to_string()));
    }
    Err(PyTypeError::new_err(format!(
        "parameter {index} has type {}, which writerlock.postgres cannot send; pass None, bool, \
         int, float, str, bytes, datetime, date, time, Decimal, UUID, dict or list",
        describe_type(value)
    )))
}

/// Converts the parameters of a statement: a sequence (tuple, list), or `None` for none.
pub fn to_values(params: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<Value>> {
    let Some(params) = params else {
        return Ok(Vec::new());
    };
    if params.is_none() {
        return Ok(Vec::new());
    }
    if params.is_instance_of::<PyString>()
        || params.is_instance_of::<PyBytes>()
        || params.is_instance_of::<PyDict>()
    {
        return Err(PyTypeError::new_err(format!(
            "params must be a sequence of values such as a tuple or a list (one per ? or $n \
             placeholder), not {}",
            describe_type(params)
        )));
    }
    let seq = params.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "params must be a sequence of values such as a tuple or a list (one per ? or $n \
             placeholder), not {}",
            describe_type(params)
        ))
    })?;
    let mut out = Vec::new();
    for (i, item) in seq.enumerate() {
        out.push(to_value(&item?, i + 1)?);
    }
    Ok(out)
}

fn json_to_py<'py>(py: Python<'py>, value: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        serde_json::Value::Null => py.None().into_bound(py),
        serde_json::Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        serde_json::Value::String(s) => PyString::new(py, s).into_any(),
        serde_json::Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(json_to_py(py, item)?)?;
            }
            list.into_any()
        }
        serde_json::Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, json_to_py(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

fn timestamp_to_py<'py>(
    py: Python<'py>,
    micros: i64,
    time_zone: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let utc = PyTzInfo::utc(py)?.to_owned();
    let tz = if time_zone { Some(&utc) } else { None };
    let days = micros.div_euclid(MICROS_PER_DAY);
    let rest = micros.rem_euclid(MICROS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    let year = match micros {
        i64::MAX => 9999,
        i64::MIN => 1,
        _ => year,
    };
    if micros == i64::MAX || micros == i64::MIN {
        // infinity and -infinity: datetime.max and datetime.min.
        let (month, day, h, m, s, us) = if micros == i64::MAX {
            (12, 31, 23, 59, 59, 999_999)
        } else {
            (1, 1, 0, 0, 0, 0)
        };
        return Ok(PyDateTime::new(py, year as i32, month, day, h, m, s, us, tz)?.into_any());
    }
    if !(1..=9999).contains(&year) {
        return Err(PyValueError::new_err(format!(
            "a timestamp in year {year} is outside Python's datetime range (1 to 9999); cast \
             the column to text in the query"
        )));
    }
    let secs = rest / 1_000_000;
    let us = (rest % 1_000_000) as u32;
    Ok(PyDateTime::new(
        py,
        year as i32,
        month as u8,
        day as u8,
        (secs / 3600) as u8,
        ((secs / 60) % 60) as u8,
        (secs % 60) as u8,
        us,
        tz,
    )?
    .into_any())
}

/// Converts a column value of the column `column` to its Python object.
pub fn to_py<'py>(py: Python<'py>, value: Value, column: &Column) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, b).to_owned().into_any(),
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::Float(f) => PyFloat::new(py, f).into_any(),
        Value::Text(text) => {
            let converter = match column.type_name() {
                "date" if !text.contains("infinity") && !text.ends_with(" BC") => {
                    Some(PyDate::type_object(py).getattr(intern!(py, "fromisoformat"))?)
                }
                "time" => Some(PyTime::type_object(py).getattr(intern!(py, "fromisoformat"))?),
                "uuid" => Some(py.import(intern!(py, "uuid"))?.getattr("UUID")?),
                _ => None,
            };
            match converter {
                Some(convert) => convert.call1((text.as_str(),))?,
                None => PyString::new(py, &text).into_any(),
            }
        }
        Value::Bytes(bytes) => PyBytes::new(py, &bytes).into_any(),
        Value::Json(json) => json_to_py(py, &json)?,
        Value::Timestamp { micros, time_zone } => timestamp_to_py(py, micros, time_zone)?,
        Value::Numeric(text) => py
            .import(intern!(py, "decimal"))?
            .getattr("Decimal")?
            .call1((text,))?,
    })
}

/// A row as a tuple.
pub fn row_to_py<'py>(
    py: Python<'py>,
    values: Vec<Value>,
    columns: &[Column],
) -> PyResult<Bound<'py, PyTuple>> {
    let mut items = Vec::with_capacity(values.len());
    for (value, column) in values.into_iter().zip(columns) {
        items.push(to_py(py, value, column)?);
    }
    PyTuple::new(py, items)
}
