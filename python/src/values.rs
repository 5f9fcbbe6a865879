//! Values of the Postgres session in both directions.
//!
//! Parameters carry their Python type, as psycopg 3 sends them: `None`, `bool`, `int`
//! (`int2`/`int4`/`int8` by size, `numeric` beyond 64 bits), `float` (`float8`), `str`
//! (untyped: the server takes the type the statement expects), `bytes`/`bytearray`/
//! `memoryview` (`bytea`), `datetime.datetime` (`timestamptz` when aware, `timestamp` when
//! naive), `datetime.date`, `datetime.time` (`timetz` when aware), `datetime.timedelta`
//! (`interval`), `decimal.Decimal` (`numeric`), `uuid.UUID`, `ipaddress` addresses and
//! interfaces (`inet`) and networks (`cidr`), `list` (an array of its elements' type), `dict`
//! and `writerlock.postgres.Json` (JSON, untyped).
//!
//! Columns map as psycopg 3 maps them: `NULL` of any type to `None`, booleans, integers,
//! floats, text, `bytea` to `bytes`, `json`/`jsonb` to what `json.loads` returns (integers of
//! any size, keys in their order), `timestamp` to a naive `datetime`, `timestamptz` to an
//! aware one (the connection converts it to the session's `TimeZone`), `numeric` to
//! `decimal.Decimal`, `date`/`time`/`timetz`/`interval` to `datetime.date`/`time`/
//! `timedelta`, `uuid` to `uuid.UUID`, `inet`/`cidr` to `ipaddress` objects, arrays to lists,
//! records to tuples of text, every other readable type to its text. A date or timestamp
//! Python cannot hold (`infinity`, beyond year 9999, BC) is a `DataError` naming the column
//! and the value.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDate, PyDateAccess, PyDateTime, PyDelta, PyDeltaAccess, PyDict,
    PyFloat, PyInt, PyList, PyMemoryView, PyString, PyTime, PyTimeAccess, PyTuple, PyTzInfo,
};
use pyo3::PyTypeInfo;
use pyo3::{import_exception, intern};

use writerlock::calendar::{civil_from_days, days_from_civil};
use writerlock::pg::{Column, Value};

const MICROS_PER_DAY: i64 = 86_400_000_000;

import_exception!(writerlock._errors, DataError);

/// The DB-API `DataError` for a column value Python cannot hold (SQLSTATE 22008, datetime
/// field overflow).
fn data_error(column: &str, problem: &str, text: &str) -> PyErr {
    DataError::new_err((
        format!(
            "column {column}: {problem}: '{text}'; Python cannot hold it: cast the column to \
             text in the query (for example {column}::text) to read it"
        ),
        "22008",
    ))
}

/// The OIDs of the types a parameter declares from its Python type.
const DATE_OID: u32 = 1082;
const TIME_OID: u32 = 1083;
const TIMETZ_OID: u32 = 1266;
const UUID_OID: u32 = 2950;
const INET_OID: u32 = 869;
const CIDR_OID: u32 = 650;

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
    if value.is_instance_of::<PyDate>() {
        return Ok(Value::Typed {
            type_oid: DATE_OID,
            text: value.call_method0(intern!(py, "isoformat"))?.extract()?,
        });
    }
    if value.is_instance_of::<PyTime>() {
        let aware = !value.getattr(intern!(py, "tzinfo"))?.is_none();
        return Ok(Value::Typed {
            type_oid: if aware { TIMETZ_OID } else { TIME_OID },
            text: value.call_method0(intern!(py, "isoformat"))?.extract()?,
        });
    }
    if let Ok(delta) = value.cast::<PyDelta>() {
        return Ok(Value::Interval {
            months: 0,
            days: delta.get_days(),
            micros: i64::from(delta.get_seconds()) * 1_000_000
                + i64::from(delta.get_microseconds()),
        });
    }
    if let Ok(list) = value.cast::<PyList>() {
        let mut items = Vec::with_capacity(list.len());
        for item in list.iter() {
            items.push(to_value(&item, index)?);
        }
        return Ok(Value::Array(items));
    }
    if value.is_instance_of::<PyDict>() {
        return json_value(value, index, None);
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
        return Ok(Value::Typed {
            type_oid: UUID_OID,
            text: value.str()?.to_string(),
        });
    }
    let ip = py.import(intern!(py, "ipaddress"))?;
    for (class, oid) in [
        ("IPv4Address", INET_OID),
        ("IPv6Address", INET_OID),
        ("IPv4Interface", INET_OID),
        ("IPv6Interface", INET_OID),
        ("IPv4Network", CIDR_OID),
        ("IPv6Network", CIDR_OID),
    ] {
        if value.is_instance(&ip.getattr(class)?)? {
            return Ok(Value::Typed {
                type_oid: oid,
                text: value.str()?.to_string(),
            });
        }
    }
    // postgres.Json and postgres.Jsonb carry the OID of their type (json 114, jsonb 3802);
    // asked last, so the common types never raise and drop an AttributeError here.
    if let Ok(oid) = value.getattr(intern!(py, "_writerlock_json")) {
        return json_value(
            &value.getattr(intern!(py, "obj"))?,
            index,
            Some(oid.extract()?),
        );
    }
    Err(PyTypeError::new_err(format!(
        "parameter {index} has type {}, which writerlock.postgres cannot send; pass None, bool, \
         int, float, str, bytes, datetime, date, time, timedelta, Decimal, UUID, an ipaddress \
         address, interface or network, a list (an array), a dict or postgres.Json(value) \
         (JSON), or convert it to str",
        describe_type(value)
    )))
}

/// A JSON parameter: `value` as `json.dumps` writes it (no NaN), sent as the type of a
/// `postgres.Json`/`Jsonb` wrapper (`type_oid`), or parsed into a JSON value for a dict.
fn json_value(value: &Bound<'_, PyAny>, index: usize, type_oid: Option<u32>) -> PyResult<Value> {
    let py = value.py();
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
    if let Some(type_oid) = type_oid {
        return Ok(Value::Typed { type_oid, text });
    }
    let parsed = serde_json::from_str(&text).map_err(|e| {
        PyValueError::new_err(format!("parameter {index} cannot be sent as JSON: {e}"))
    })?;
    Ok(Value::Json(Box::new(parsed)))
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
            } else {
                // Exact digits (the core keeps them): an integer of any size as `int`, a
                // fraction or exponent as `float`, as `json.loads` reads them.
                let text = n.to_string();
                if text.contains(['.', 'e', 'E']) {
                    PyFloat::type_object(py).call1((text,))?
                } else {
                    PyInt::type_object(py).call1((text,))?
                }
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
    column: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let days = micros.div_euclid(MICROS_PER_DAY);
    let rest = micros.rem_euclid(MICROS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    let text = || {
        Value::Timestamp { micros, time_zone }
            .pg_text()
            .unwrap_or_default()
    };
    if micros == i64::MAX || year > 9999 {
        return Err(data_error(
            column,
            "timestamp too large (after year 10K)",
            &text(),
        ));
    }
    if micros == i64::MIN || year < 1 {
        return Err(data_error(
            column,
            "timestamp too small (before year 1)",
            &text(),
        ));
    }
    let utc = PyTzInfo::utc(py)?.to_owned();
    let tz = if time_zone { Some(&utc) } else { None };
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

/// An interval as psycopg 3 reads it: a month is 30 days, a year 365.
fn interval_to_py<'py>(
    py: Python<'py>,
    months: i32,
    days: i32,
    micros: i64,
    column: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let (years, rest) = (i64::from(months) / 12, i64::from(months) % 12);
    let total_days = i64::from(days) + 30 * rest + 365 * years;
    let delta = PyDelta::type_object(py);
    let kwargs = PyDict::new(py);
    kwargs.set_item("days", total_days)?;
    kwargs.set_item("microseconds", micros)?;
    delta.call((), Some(&kwargs)).map_err(|_| {
        data_error(
            column,
            "interval out of Python's timedelta range",
            &Value::Interval {
                months,
                days,
                micros,
            }
            .pg_text()
            .unwrap_or_default(),
        )
    })
}

/// A `timetz` text (`12:00:00+02`, `01:02:03.5-05:30`) as an aware `datetime.time`.
fn timetz_to_py<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    let at = text.rfind(['+', '-']).unwrap_or(text.len());
    let (time, zone) = text.split_at(at);
    let mut offset = 0i64;
    if let Some(sign) = zone.chars().next() {
        let parts: Vec<i64> = zone[1..]
            .split(':')
            .map(|p| p.parse().unwrap_or(0))
            .collect();
        let secs = parts.first().copied().unwrap_or(0) * 3600
            + parts.get(1).copied().unwrap_or(0) * 60
            + parts.get(2).copied().unwrap_or(0);
        offset = if sign == '-' { -secs } else { secs };
    }
    let datetime = py.import(intern!(py, "datetime"))?;
    let tz = datetime
        .getattr("timezone")?
        .call1((PyDelta::new(py, 0, offset as i32, 0, true)?,))?;
    let naive = PyTime::type_object(py).call_method1(intern!(py, "fromisoformat"), (time,))?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("tzinfo", tz)?;
    naive.call_method("replace", (), Some(&kwargs))
}

/// A `date` text (`2024-05-01`, `infinity`, `0044-03-15 BC`) as a `datetime.date`.
fn date_to_py<'py>(py: Python<'py>, text: &str, column: &str) -> PyResult<Bound<'py, PyAny>> {
    if text == "infinity" || text.split('-').next().is_some_and(|y| y.len() > 4) {
        return Err(data_error(column, "date too large (after year 10K)", text));
    }
    if text == "-infinity" || text.ends_with(" BC") {
        return Err(data_error(column, "date too small (before year 1)", text));
    }
    PyDate::type_object(py).call_method1(intern!(py, "fromisoformat"), (text,))
}

/// Converts a column value of type `type_name` (in column `column`) to its Python object.
pub fn value_to_py<'py>(
    py: Python<'py>,
    value: Value,
    type_name: &str,
    column: &str,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, b).to_owned().into_any(),
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::Float(f) => PyFloat::new(py, f).into_any(),
        Value::Text(text) | Value::Typed { text, .. } => match type_name {
            "date" => date_to_py(py, &text, column)?,
            "time" => {
                PyTime::type_object(py).call_method1(intern!(py, "fromisoformat"), (text,))?
            }
            "timetz" => timetz_to_py(py, &text)?,
            "uuid" => py
                .import(intern!(py, "uuid"))?
                .getattr("UUID")?
                .call1((text,))?,
            "inet" => {
                let ip = py.import(intern!(py, "ipaddress"))?;
                if text.contains('/') {
                    ip.getattr("ip_interface")?.call1((text,))?
                } else {
                    ip.getattr("ip_address")?.call1((text,))?
                }
            }
            "cidr" => py
                .import(intern!(py, "ipaddress"))?
                .getattr("ip_network")?
                .call1((text,))?,
            _ => PyString::new(py, &text).into_any(),
        },
        Value::Bytes(bytes) => PyBytes::new(py, &bytes).into_any(),
        Value::Json(json) => json_to_py(py, &json)?,
        Value::Timestamp { micros, time_zone } => timestamp_to_py(py, micros, time_zone, column)?,
        Value::Numeric(text) => py
            .import(intern!(py, "decimal"))?
            .getattr("Decimal")?
            .call1((text,))?,
        Value::Interval {
            months,
            days,
            micros,
        } => interval_to_py(py, months, days, micros, column)?,
        Value::Array(items) => {
            let element = type_name.strip_prefix('_').unwrap_or(type_name);
            let list = PyList::empty(py);
            for item in items {
                let elem_type = if matches!(item, Value::Array(_)) {
                    type_name
                } else {
                    element
                };
                list.append(value_to_py(py, item, elem_type, column)?)?;
            }
            list.into_any()
        }
        Value::Record(fields) => {
            let mut items = Vec::with_capacity(fields.len());
            for field in fields {
                items.push(value_to_py(py, field, "text", column)?);
            }
            PyTuple::new(py, items)?.into_any()
        }
    })
}

/// Converts a column value of the column `column` to its Python object.
pub fn to_py<'py>(py: Python<'py>, value: Value, column: &Column) -> PyResult<Bound<'py, PyAny>> {
    value_to_py(py, value, column.type_name(), column.name())
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
