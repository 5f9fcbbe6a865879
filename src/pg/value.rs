//! Values that cross the session in both directions, and the rows a statement returns.
//!
//! Parameters are sent in Postgres text format with no declared type (the server converts
//! them to the type the statement expects), except bytes, which go in binary as a `bytea`
//! value (where the statement expects another type, the server converts or refuses it as
//! SQL does for a `bytea`). Columns are read from
//! the binary format into the natural [`Value`] of their type; a column type this crate
//! cannot read is an
//! [`Error::UnsupportedType`](super::Error::UnsupportedType) that says how to cast it.

use std::error::Error as StdError;

use bytes::{BufMut, BytesMut};
use postgres::types::{Format, IsNull, Kind, ToSql, Type};

/// Microseconds from 1970-01-01 to 2000-01-01, the Postgres epoch.
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;
/// Days from 1970-01-01 to 2000-01-01.
const PG_EPOCH_DAYS: i64 = 10_957;

/// One value sent as a parameter or read from a column.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL `NULL`.
    Null,
    /// `boolean`.
    Bool(bool),
    /// `smallint`, `integer`, `bigint` and `oid`.
    Int(i64),
    /// `real` and `double precision`.
    Float(f64),
    /// Text types (`text`, `varchar`, `char(n)`, `name`, enums), and `date`, `time` and
    /// `uuid` in their Postgres text form.
    Text(String),
    /// `bytea`.
    Bytes(Vec<u8>),
    /// `json` and `jsonb`.
    Json(serde_json::Value),
    /// `timestamp` and `timestamptz`.
    Timestamp {
        /// Microseconds since 1970-01-01 00:00:00 (UTC for `timestamptz`, the wall-clock
        /// reading for `timestamp`); `i64::MAX` and `i64::MIN` are `infinity` and
        /// `-infinity`.
        micros: i64,
        /// Whether the value is a `timestamptz` (an instant) rather than a `timestamp`.
        time_zone: bool,
    },
    /// `numeric`, as its exact decimal text (`-12.340`, `NaN`, `Infinity`).
    Numeric(String),
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Int(v)
    }
}

impl From<i32> for Value {
    fn from(v: i32) -> Value {
        Value::Int(v.into())
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Text(v.to_string())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Text(v)
    }
}

impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Value {
        Value::Bytes(v)
    }
}

impl From<serde_json::Value> for Value {
    fn from(v: serde_json::Value) -> Value {
        Value::Json(v)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

impl Value {
    /// The integer, if this is an [`Value::Int`].
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// The text, if this is a [`Value::Text`] or [`Value::Numeric`].
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Text(v) | Value::Numeric(v) => Some(v),
            _ => None,
        }
    }

    /// The boolean, if this is a [`Value::Bool`].
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(v) => Some(*v),
            _ => None,
        }
    }

    /// Whether this is [`Value::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The integer, from an [`Value::Int`] or from its text (a driver that returns every
    /// column as text, such as PDO).
    pub fn read_i64(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            Value::Text(s) | Value::Numeric(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    /// The boolean, from a [`Value::Bool`], an integer, or Postgres' text forms (`t`, `f`,
    /// `true`, `on`, ...).
    pub fn read_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(v) => Some(*v),
            Value::Int(v) => Some(*v != 0),
            Value::Text(s) => match s.trim() {
                "t" | "true" | "1" | "on" => Some(true),
                "f" | "false" | "0" | "off" => Some(false),
                _ => None,
            },
            _ => None,
        }
    }

    /// The value as text: text as it is, numbers and booleans in Postgres' text form
    /// (`None` for `NULL` and the other kinds).
    pub fn read_text(&self) -> Option<String> {
        match self {
            Value::Text(s) | Value::Numeric(s) => Some(s.clone()),
            Value::Int(v) => Some(v.to_string()),
            Value::Float(v) => Some(v.to_string()),
            Value::Bool(v) => Some(if *v { "on" } else { "off" }.to_string()),
            _ => None,
        }
    }
}

fn base_type(ty: &Type) -> &Type {
    match ty.kind() {
        Kind::Domain(inner) => base_type(inner),
        _ => ty,
    }
}

type BoxError = Box<dyn StdError + Sync + Send>;

impl ToSql for Value {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        let text = match self {
            Value::Null => return Ok(IsNull::Yes),
            Value::Bytes(bytes) => {
                if *base_type(ty) != Type::BYTEA {
                    return Err(format!(
                        "a bytes value goes only to a bytea parameter; cast the placeholder, \
                         for example ?::bytea (the server expects {})",
                        ty.name()
                    )
                    .into());
                }
                out.put_slice(bytes);
                return Ok(IsNull::No);
            }
            Value::Bool(v) => (if *v { "true" } else { "false" }).to_string(),
            Value::Int(v) => v.to_string(),
            Value::Float(v) => float_text(*v),
            Value::Text(v) | Value::Numeric(v) => v.clone(),
            Value::Json(v) => v.to_string(),
            Value::Timestamp { micros, time_zone } => timestamp_text(*micros, *time_zone),
        };
        out.put_slice(text.as_bytes());
        Ok(IsNull::No)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    fn to_sql_checked(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        self.to_sql(ty, out)
    }

    fn encode_format(&self, _ty: &Type) -> Format {
        match self {
            Value::Bytes(_) => Format::Binary,
            _ => Format::Text,
        }
    }
}

fn float_text(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v == f64::INFINITY {
        "Infinity".to_string()
    } else if v == f64::NEG_INFINITY {
        "-Infinity".to_string()
    } else {
        format!("{v:?}")
    }
}

fn date_text(days_since_unix: i64) -> String {
    let (y, m, d) = crate::calendar::civil_from_days(days_since_unix);
    if y <= 0 {
        format!("{:04}-{m:02}-{d:02} BC", 1 - y)
    } else {
        format!("{y:04}-{m:02}-{d:02}")
    }
}

fn time_text(micros_of_day: i64) -> String {
    let secs = micros_of_day.div_euclid(1_000_000);
    let frac = micros_of_day.rem_euclid(1_000_000);
    let (h, mi, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    if frac == 0 {
        format!("{h:02}:{mi:02}:{s:02}")
    } else {
        let f = format!("{frac:06}");
        format!("{h:02}:{mi:02}:{s:02}.{}", f.trim_end_matches('0'))
    }
}

/// A timestamp in the text form Postgres reads: `2024-05-01 12:00:00.25+00`.
pub(crate) fn timestamp_text(micros: i64, time_zone: bool) -> String {
    match micros {
        i64::MAX => return "infinity".to_string(),
        i64::MIN => return "-infinity".to_string(),
        _ => {}
    }
    let days = micros.div_euclid(86_400_000_000);
    let rest = micros.rem_euclid(86_400_000_000);
    let date = date_text(days);
    let (date, bc) = match date.strip_suffix(" BC") {
        Some(d) => (d.to_string(), " BC"),
        None => (date, ""),
    };
    let tz = if time_zone { "+00" } else { "" };
    format!("{date} {}{tz}{bc}", time_text(rest))
}

fn be<const N: usize>(raw: &[u8]) -> Result<[u8; N], String> {
    raw.try_into()
        .map_err(|_| format!("expected {N} bytes, got {}", raw.len()))
}

/// Reads a binary `numeric` into its decimal text.
fn numeric_text(raw: &[u8]) -> Result<String, String> {
    let word = |i: usize| -> Result<u16, String> {
        raw.get(i..i + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or_else(|| "numeric value too short".to_string())
    };
    let ndigits = usize::from(word(0)?);
    let weight = i64::from(word(2)? as i16);
    let sign = word(4)?;
    let dscale = usize::from(word(6)?);
    match sign {
        0xC000 => return Ok("NaN".to_string()),
        0xD000 => return Ok("Infinity".to_string()),
        0xF000 => return Ok("-Infinity".to_string()),
        _ => {}
    }
    let mut digits = Vec::with_capacity(ndigits);
    for k in 0..ndigits {
        digits.push(i64::from(word(8 + 2 * k)?));
    }
    let digit = |pos: i64| -> i64 {
        usize::try_from(pos)
            .ok()
            .and_then(|p| digits.get(p).copied())
            .unwrap_or(0)
    };
    let mut text = String::new();
    if sign == 0x4000 {
        text.push('-');
    }
    if weight < 0 {
        text.push('0');
    } else {
        for pos in 0..=weight {
            if pos == 0 {
                text.push_str(&digit(pos).to_string());
            } else {
                text.push_str(&format!("{:04}", digit(pos)));
            }
        }
    }
    if dscale > 0 {
        let mut frac = String::new();
        let mut pos = weight + 1;
        while frac.len() < dscale {
            frac.push_str(&format!("{:04}", digit(pos)));
            pos += 1;
        }
        frac.truncate(dscale);
        text.push('.');
        text.push_str(&frac);
    }
    Ok(text)
}

fn uuid_text(raw: &[u8]) -> Result<String, String> {
    let b: [u8; 16] = be(raw)?;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    ))
}

fn utf8(raw: &[u8]) -> Result<String, String> {
    String::from_utf8(raw.to_vec()).map_err(|e| e.to_string())
}

/// Whether [`decode`] can read columns of type `ty`.
pub(crate) fn readable(ty: &Type) -> bool {
    let ty = base_type(ty);
    matches!(ty.kind(), Kind::Enum(_))
        || matches!(
            *ty,
            Type::VOID
                | Type::BOOL
                | Type::INT2
                | Type::INT4
                | Type::INT8
                | Type::OID
                | Type::XID
                | Type::REGPROC
                | Type::REGCLASS
                | Type::REGTYPE
                | Type::FLOAT4
                | Type::FLOAT8
                | Type::TEXT
                | Type::VARCHAR
                | Type::BPCHAR
                | Type::NAME
                | Type::UNKNOWN
                | Type::CHAR
                | Type::XML
                | Type::BYTEA
                | Type::JSON
                | Type::JSONB
                | Type::TIMESTAMP
                | Type::TIMESTAMPTZ
                | Type::DATE
                | Type::TIME
                | Type::UUID
                | Type::NUMERIC
        )
}

/// Reads one binary column value of type `ty`; `Err(None)` when the type is unsupported.
pub(crate) fn decode(ty: &Type, raw: Option<&[u8]>) -> Result<Value, Option<String>> {
    let Some(raw) = raw else {
        return Ok(Value::Null);
    };
    let ty = base_type(ty);
    if let Kind::Enum(_) = ty.kind() {
        return utf8(raw).map(Value::Text).map_err(Some);
    }
    let v = match *ty {
        Type::VOID => Value::Null,
        Type::BOOL => Value::Bool(raw.first().is_some_and(|b| *b != 0)),
        Type::INT2 => Value::Int(i16::from_be_bytes(be(raw)?).into()),
        Type::INT4 => Value::Int(i32::from_be_bytes(be(raw)?).into()),
        Type::INT8 => Value::Int(i64::from_be_bytes(be(raw)?)),
        Type::OID | Type::XID | Type::REGPROC | Type::REGCLASS | Type::REGTYPE => {
            Value::Int(u32::from_be_bytes(be(raw)?).into())
        }
        Type::FLOAT4 => Value::Float(f32::from_be_bytes(be(raw)?).into()),
        Type::FLOAT8 => Value::Float(f64::from_be_bytes(be(raw)?)),
        Type::TEXT
        | Type::VARCHAR
        | Type::BPCHAR
        | Type::NAME
        | Type::UNKNOWN
        | Type::CHAR
        | Type::XML => Value::Text(utf8(raw)?),
        Type::BYTEA => Value::Bytes(raw.to_vec()),
        Type::JSON => Value::Json(serde_json::from_slice(raw).map_err(|e| e.to_string())?),
        Type::JSONB => {
            let body = match raw.split_first() {
                Some((1, body)) => body,
                _ => return Err(Some("unknown jsonb version".to_string())),
            };
            Value::Json(serde_json::from_slice(body).map_err(|e| e.to_string())?)
        }
        Type::TIMESTAMP | Type::TIMESTAMPTZ => {
            let pg = i64::from_be_bytes(be(raw)?);
            let micros = match pg {
                i64::MAX | i64::MIN => pg,
                _ => pg.saturating_add(PG_EPOCH_MICROS),
            };
            Value::Timestamp {
                micros,
                time_zone: *ty == Type::TIMESTAMPTZ,
            }
        }
        Type::DATE => {
            let days = i32::from_be_bytes(be(raw)?);
            match days {
                i32::MAX => Value::Text("infinity".to_string()),
                i32::MIN => Value::Text("-infinity".to_string()),
                d => Value::Text(date_text(i64::from(d) + PG_EPOCH_DAYS)),
            }
        }
        Type::TIME => Value::Text(time_text(i64::from_be_bytes(be(raw)?))),
        Type::UUID => Value::Text(uuid_text(raw)?),
        Type::NUMERIC => Value::Numeric(numeric_text(raw)?),
        _ => return Err(None),
    };
    Ok(v)
}

/// A result column: its name and type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    name: String,
    type_name: String,
    type_oid: u32,
}

impl Column {
    pub(crate) fn new(name: &str, ty: &Type) -> Column {
        Column {
            name: name.to_string(),
            type_name: ty.name().to_string(),
            type_oid: ty.oid(),
        }
    }

    /// The column's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name of its Postgres type, such as `int8` or `timestamptz`.
    pub fn type_name(&self) -> &str {
        &self.type_name
    }

    /// The OID of its Postgres type.
    pub fn type_oid(&self) -> u32 {
        self.type_oid
    }
}

/// One result row: a value per column.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    values: Vec<Value>,
}

impl Row {
    pub(crate) fn new(values: Vec<Value>) -> Row {
        Row { values }
    }

    /// The value of column `index` (from 0).
    pub fn get(&self, index: usize) -> Option<&Value> {
        self.values.get(index)
    }

    /// All values, in column order.
    pub fn values(&self) -> &[Value] {
        &self.values
    }

    /// Takes the values out.
    pub fn into_values(self) -> Vec<Value> {
        self.values
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the row has no columns.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// What a statement returned: its columns, its rows, and the row count of its command tag.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rows {
    columns: Vec<Column>,
    rows: Vec<Row>,
    affected: u64,
}

impl Rows {
    pub(crate) fn new(columns: Vec<Column>, rows: Vec<Row>, affected: u64) -> Rows {
        Rows {
            columns,
            rows,
            affected,
        }
    }

    /// The result columns (empty for statements that return no rows).
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The rows returned.
    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// Takes the rows out.
    pub fn into_rows(self) -> Vec<Row> {
        self.rows
    }

    /// The row count from the command tag: rows inserted, updated, deleted or selected.
    pub fn affected(&self) -> u64 {
        self.affected
    }

    /// The first row, if any.
    pub fn first(&self) -> Option<&Row> {
        self.rows.first()
    }

    /// The value in `row` of the column named `name`.
    pub fn get(&self, row: usize, name: &str) -> Option<&Value> {
        let col = self.columns.iter().position(|c| c.name == name)?;
        self.rows.get(row)?.get(col)
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether no rows came back.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numeric(ndigits: u16, weight: i16, sign: u16, dscale: u16, digits: &[u16]) -> Vec<u8> {
        let mut v = Vec::new();
        for w in [ndigits, weight as u16, sign, dscale] {
            v.extend_from_slice(&w.to_be_bytes());
        }
        for d in digits {
            v.extend_from_slice(&d.to_be_bytes());
        }
        v
    }

    #[test]
    fn numerics() {
        assert_eq!(numeric_text(&numeric(0, 0, 0, 0, &[])).as_deref(), Ok("0"));
        assert_eq!(
            numeric_text(&numeric(2, 0, 0x4000, 3, &[12, 3400])).as_deref(),
            Ok("-12.340")
        );
        assert_eq!(
            numeric_text(&numeric(3, 2, 0, 0, &[1, 2345, 6789])).as_deref(),
            Ok("123456789")
        );
        assert_eq!(
            numeric_text(&numeric(1, -1, 0, 4, &[1])).as_deref(),
            Ok("0.0001")
        );
        assert_eq!(
            numeric_text(&numeric(1, -2, 0, 6, &[1200])).as_deref(),
            Ok("0.000012")
        );
        assert_eq!(
            numeric_text(&numeric(1, 5, 0, 0, &[1])).as_deref(),
            Ok("100000000000000000000")
        );
        assert_eq!(
            numeric_text(&numeric(0, 0, 0xC000, 0, &[])).as_deref(),
            Ok("NaN")
        );
        assert!(numeric_text(&[0, 1]).is_err());
    }

    #[test]
    fn timestamps_and_dates() {
        assert_eq!(timestamp_text(0, true), "1970-01-01 00:00:00+00");
        assert_eq!(
            timestamp_text(1_714_564_800_250_000, false),
            "2024-05-01 12:00:00.25"
        );
        assert_eq!(timestamp_text(-1, false), "1969-12-31 23:59:59.999999");
        assert_eq!(timestamp_text(i64::MAX, true), "infinity");
        assert_eq!(date_text(0), "1970-01-01");
        assert_eq!(date_text(-719_528), "0001-01-01 BC");
        let ts = decode(&Type::TIMESTAMPTZ, Some(&0i64.to_be_bytes()));
        assert_eq!(
            ts,
            Ok(Value::Timestamp {
                micros: PG_EPOCH_MICROS,
                time_zone: true
            })
        );
    }

    #[test]
    fn simple_decodes() {
        assert_eq!(
            decode(&Type::INT4, Some(&7i32.to_be_bytes())),
            Ok(Value::Int(7))
        );
        assert_eq!(decode(&Type::TEXT, None), Ok(Value::Null));
        assert_eq!(decode(&Type::VOID, Some(&[])), Ok(Value::Null));
        assert_eq!(
            decode(&Type::JSONB, Some(b"\x01{\"a\":1}")),
            Ok(Value::Json(serde_json::json!({"a": 1})))
        );
        assert_eq!(decode(&Type::INET, Some(&[1])), Err(None));
        assert!(!readable(&Type::INET));
        assert!(readable(&Type::NUMERIC) && readable(&Type::VOID));
        assert!(decode(&Type::INT8, Some(&[1])).is_err());
    }

    #[test]
    fn params_as_text() {
        let mut out = BytesMut::new();
        Value::Float(f64::NEG_INFINITY)
            .to_sql(&Type::FLOAT8, &mut out)
            .ok();
        assert_eq!(&out[..], b"-Infinity");
        assert!(Value::Bytes(vec![1]).to_sql(&Type::TEXT, &mut out).is_err());
        assert!(matches!(
            Value::Text("x".into()).encode_format(&Type::TEXT),
            Format::Text
        ));
    }
}
