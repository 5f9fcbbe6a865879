//! Values that cross the session in both directions, and the rows a statement returns.
//!
//! Parameters are sent in Postgres text format with the type their value declares
//! ([`Value::declared_type`], as psycopg 3 declares a Python value's type): a boolean as
//! `bool`, an integer as the smallest of `int2`, `int4`, `int8` that holds it, a float as
//! `float8`, a timestamp as `timestamp` or `timestamptz`, an array as the array of its
//! elements' type, [`Value::Typed`] as its own type; text and JSON go without a type (the
//! server takes the type the statement expects), bytes in binary as `bytea`.
//!
//! Columns are read from the binary format into the natural [`Value`] of their type: the
//! common scalar types, `interval`, arrays (nested for several dimensions), records, and in
//! their Postgres text form `date`, `time`, `timetz`, `uuid`, `inet`, `cidr`, `macaddr`,
//! `money` (as the `C` locale prints it), ranges, `bit`, `pg_lsn`, geometric types,
//! `tsvector` and composite types. `NULL`
//! of any type is [`Value::Null`]; a value of a type this crate cannot read is an
//! [`Error::UnsupportedType`](super::Error::UnsupportedType) that says how to cast it.

use std::collections::{BTreeSet, HashMap};
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
    /// `json` and `jsonb` (boxed, so that every other value stays small).
    Json(Box<serde_json::Value>),
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
    /// `interval`: months, days and microseconds, kept apart as Postgres keeps them.
    Interval {
        /// Whole months (a year is 12).
        months: i32,
        /// Whole days.
        days: i32,
        /// Microseconds.
        micros: i64,
    },
    /// An array (`int4[]`, `text[]`, ...): its elements, nested lists for several
    /// dimensions. As a parameter it is declared as the array of its elements' type.
    Array(Vec<Value>),
    /// A `record` (`SELECT row(1, 'a')`): each field in its text form, or [`Value::Null`].
    Record(Vec<Value>),
    /// A value of another type in its Postgres text form, declared as the type with OID
    /// `type_oid` when sent as a parameter (`date` 1082, `interval` 1186, `inet` 869, `uuid`
    /// 2950, ...).
    Typed {
        /// The OID of its type.
        type_oid: u32,
        /// Its text form, as Postgres reads it.
        text: String,
    },
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
        Value::Json(Box::new(v))
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

    /// The text, if this is a [`Value::Text`], [`Value::Numeric`] or [`Value::Typed`].
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Text(v) | Value::Numeric(v) | Value::Typed { text: v, .. } => Some(v),
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
            Value::Text(s) | Value::Numeric(s) | Value::Typed { text: s, .. } => Some(s.clone()),
            Value::Int(v) => Some(v.to_string()),
            Value::Float(v) => Some(v.to_string()),
            Value::Bool(v) => Some(if *v { "on" } else { "off" }.to_string()),
            _ => None,
        }
    }

    /// The value in the text form Postgres prints and reads (`t`, `12`, `{1,2,NULL}`,
    /// `1 day 02:00:00`, `2024-05-01 12:00:00+00`, `\x0102` for bytes, `infinity`); `None`
    /// for `NULL`.
    pub fn pg_text(&self) -> Option<String> {
        Some(match self {
            Value::Null => return None,
            Value::Bool(v) => (if *v { "t" } else { "f" }).to_string(),
            Value::Int(v) => v.to_string(),
            Value::Float(v) => float_text(*v),
            Value::Text(v) | Value::Numeric(v) | Value::Typed { text: v, .. } => v.clone(),
            Value::Bytes(b) => {
                let mut text = String::with_capacity(2 + 2 * b.len());
                text.push_str("\\x");
                for byte in b {
                    text.push_str(&format!("{byte:02x}"));
                }
                text
            }
            Value::Json(v) => v.to_string(),
            Value::Timestamp { micros, time_zone } => timestamp_text(*micros, *time_zone),
            Value::Interval {
                months,
                days,
                micros,
            } => interval_text(*months, *days, *micros),
            Value::Array(items) => array_text(items),
            Value::Record(fields) => record_text(fields),
        })
    }

    /// The value as a SQL literal of the type it declares as a parameter: `NULL`,
    /// `(E'42'::int2)`, `(E'it''s')` (untyped, as an untyped parameter). The text goes in
    /// an escape string (`E'...'`, quotes doubled, backslashes escaped), which reads the
    /// same whatever `standard_conforming_strings` says.
    pub fn sql_literal(&self) -> String {
        let Some(text) = self.pg_text() else {
            return "NULL".to_string();
        };
        let mut out = String::with_capacity(text.len() + 16);
        out.push_str("(E'");
        for c in text.chars() {
            match c {
                '\'' => out.push_str("''"),
                '\\' => out.push_str("\\\\"),
                c => out.push(c),
            }
        }
        out.push('\'');
        let ty = self.declared_type();
        if ty != Type::UNKNOWN {
            out.push_str("::");
            out.push_str(ty.name());
        }
        out.push(')');
        out
    }

    /// The type this value declares when sent as a parameter, as psycopg 3 declares a
    /// Python value's: [`Type::UNKNOWN`] (the server takes the type the statement expects)
    /// for `NULL`, text, JSON and records.
    pub fn declared_type(&self) -> Type {
        match self {
            Value::Null | Value::Text(_) | Value::Json(_) | Value::Record(_) => Type::UNKNOWN,
            Value::Bool(_) => Type::BOOL,
            Value::Int(v) => int_type(*v),
            Value::Float(_) => Type::FLOAT8,
            Value::Bytes(_) => Type::BYTEA,
            Value::Timestamp {
                time_zone: true, ..
            } => Type::TIMESTAMPTZ,
            Value::Timestamp { .. } => Type::TIMESTAMP,
            Value::Numeric(_) => Type::NUMERIC,
            Value::Interval { .. } => Type::INTERVAL,
            Value::Typed { type_oid, .. } => Type::from_oid(*type_oid).unwrap_or(Type::UNKNOWN),
            Value::Array(items) => array_type(items),
        }
    }
}

/// The smallest integer type that holds `v`, as psycopg 3 picks it.
fn int_type(v: i64) -> Type {
    if i16::try_from(v).is_ok() {
        Type::INT2
    } else if i32::try_from(v).is_ok() {
        Type::INT4
    } else {
        Type::INT8
    }
}

/// The array type of `ty`, for the element types a parameter declares.
fn array_of(ty: &Type) -> Type {
    match *ty {
        Type::BOOL => Type::BOOL_ARRAY,
        Type::INT2 => Type::INT2_ARRAY,
        Type::INT4 => Type::INT4_ARRAY,
        Type::INT8 => Type::INT8_ARRAY,
        Type::FLOAT8 => Type::FLOAT8_ARRAY,
        Type::NUMERIC => Type::NUMERIC_ARRAY,
        Type::BYTEA => Type::BYTEA_ARRAY,
        Type::TEXT => Type::TEXT_ARRAY,
        Type::TIMESTAMP => Type::TIMESTAMP_ARRAY,
        Type::TIMESTAMPTZ => Type::TIMESTAMPTZ_ARRAY,
        Type::DATE => Type::DATE_ARRAY,
        Type::TIME => Type::TIME_ARRAY,
        Type::TIMETZ => Type::TIMETZ_ARRAY,
        Type::INTERVAL => Type::INTERVAL_ARRAY,
        Type::UUID => Type::UUID_ARRAY,
        Type::INET => Type::INET_ARRAY,
        Type::CIDR => Type::CIDR_ARRAY,
        Type::JSON => Type::JSON_ARRAY,
        Type::JSONB => Type::JSONB_ARRAY,
        _ => Type::UNKNOWN,
    }
}

/// An array parameter's type: the array of its elements' type (integers widened to the
/// widest element, a mix of integers and floats as `float8`), or [`Type::UNKNOWN`] when its
/// elements declare none or different types.
fn array_type(items: &[Value]) -> Type {
    fn leaves<'a>(items: &'a [Value], out: &mut Vec<&'a Value>) {
        for item in items {
            match item {
                Value::Array(inner) => leaves(inner, out),
                Value::Null => {}
                other => out.push(other),
            }
        }
    }
    let mut all = Vec::new();
    leaves(items, &mut all);
    let rank = |t: &Type| match *t {
        Type::INT2 => 1,
        Type::INT4 => 2,
        Type::INT8 => 3,
        Type::NUMERIC => 4,
        Type::FLOAT8 => 5,
        _ => 0,
    };
    let mut element: Option<Type> = None;
    for value in all {
        let ty = value.declared_type();
        element = Some(match element {
            None => ty,
            Some(seen) if seen == ty => seen,
            Some(seen) if rank(&seen) > 0 && rank(&ty) > 0 => {
                if rank(&seen) >= rank(&ty) {
                    seen
                } else {
                    ty
                }
            }
            Some(_) => return Type::UNKNOWN,
        });
    }
    match element {
        Some(ty) => array_of(&ty),
        None => Type::UNKNOWN,
    }
}

/// Quotes an array or record element as Postgres' text form needs it.
fn quoted(text: &str, specials: &[char]) -> String {
    let needs = text.is_empty()
        || text.eq_ignore_ascii_case("null")
        || text
            .chars()
            .any(|c| c.is_whitespace() || c == '"' || c == '\\' || specials.contains(&c));
    if !needs {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// An array in Postgres' text form: `{1,2,NULL}`, `{{1,2},{3,4}}`, `{"a b",c}`.
fn array_text(items: &[Value]) -> String {
    let parts: Vec<String> = items
        .iter()
        .map(|item| match item {
            Value::Null => "NULL".to_string(),
            Value::Array(inner) => array_text(inner),
            other => quoted(&other.pg_text().unwrap_or_default(), &['{', '}', ',']),
        })
        .collect();
    format!("{{{}}}", parts.join(","))
}

/// A record in Postgres' text form: `(1,a)`, `(,"a b")` (a `NULL` field is empty).
fn record_text(fields: &[Value]) -> String {
    let parts: Vec<String> = fields
        .iter()
        .map(|f| match f.pg_text() {
            None => String::new(),
            Some(t) if t.is_empty() => "\"\"".to_string(),
            Some(t) => quoted(&t, &['(', ')', ',']),
        })
        .collect();
    format!("({})", parts.join(","))
}

/// An interval as Postgres prints it (`IntervalStyle` `postgres`): `1 year 2 mons 3 days
/// 04:05:06.5`, `-1 days -02:00:00`, `00:00:00`.
pub(crate) fn interval_text(months: i32, days: i32, micros: i64) -> String {
    let unit = |n: i64, name: &str| format!("{n} {name}{}", if n == 1 { "" } else { "s" });
    let mut parts = Vec::new();
    let (years, mons) = (months / 12, months % 12);
    if years != 0 {
        parts.push(unit(years.into(), "year"));
    }
    if mons != 0 {
        parts.push(unit(mons.into(), "mon"));
    }
    if days != 0 {
        parts.push(unit(days.into(), "day"));
    }
    if micros != 0 || parts.is_empty() {
        let sign = if micros < 0 { "-" } else { "" };
        let abs = micros.unsigned_abs();
        let secs = abs / 1_000_000;
        let frac = abs % 1_000_000;
        let mut time = format!(
            "{sign}{:02}:{:02}:{:02}",
            secs / 3600,
            (secs / 60) % 60,
            secs % 60
        );
        if frac != 0 {
            time.push_str(format!(".{frac:06}").trim_end_matches('0'));
        }
        parts.push(time);
    }
    parts.join(" ")
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
            other => other.pg_text().unwrap_or_default(),
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

/// The shortest decimal that reads back as `v`, as a double: what Postgres prints for a
/// `real` and what psycopg returns.
fn float4(v: f32) -> f64 {
    if !v.is_finite() {
        return v.into();
    }
    v.to_string().parse().unwrap_or_else(|_| v.into())
}

/// A cursor over a binary value.
struct Reader<'a> {
    raw: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.raw.len() < n {
            return Err(format!(
                "value too short: wanted {n} more bytes, {} left",
                self.raw.len()
            ));
        }
        let (head, rest) = self.raw.split_at(n);
        self.raw = rest;
        Ok(head)
    }

    fn i32(&mut self) -> Result<i32, String> {
        Ok(i32::from_be_bytes(be(self.take(4)?)?))
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_be_bytes(be(self.take(4)?)?))
    }

    /// A length-prefixed element: `None` for `NULL` (length -1).
    fn element(&mut self) -> Result<Option<&'a [u8]>, String> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(None);
        }
        let len = usize::try_from(len).map_err(|e| e.to_string())?;
        self.take(len).map(Some)
    }
}

/// Decodes an element of a container (array, range, record): unsupported element types
/// are an error that names the type.
fn element(ty: &Type, raw: Option<&[u8]>, names: &RegNames) -> Result<Value, String> {
    decode_named(ty, raw, names).map_err(|e| {
        e.unwrap_or_else(|| {
            format!(
                "its elements are of type {}, which cannot be read",
                ty.name()
            )
        })
    })
}

fn array(elem: &Type, raw: &[u8], names: &RegNames) -> Result<Value, String> {
    let mut r = Reader { raw };
    let ndim = usize::try_from(r.i32()?).map_err(|e| e.to_string())?;
    let _has_nulls = r.i32()?;
    let _oid = r.u32()?;
    if ndim == 0 {
        return Ok(Value::Array(Vec::new()));
    }
    let mut dims = Vec::with_capacity(ndim);
    for _ in 0..ndim {
        dims.push(usize::try_from(r.i32()?).map_err(|e| e.to_string())?);
        let _lower = r.i32()?;
    }
    fn level(
        r: &mut Reader<'_>,
        elem: &Type,
        dims: &[usize],
        names: &RegNames,
    ) -> Result<Value, String> {
        let (&n, rest) = dims.split_first().ok_or("array without dimensions")?;
        let mut items = Vec::with_capacity(n.min(1 << 16));
        for _ in 0..n {
            items.push(if rest.is_empty() {
                let raw = r.element()?;
                element(elem, raw, names)?
            } else {
                level(r, elem, rest, names)?
            });
        }
        Ok(Value::Array(items))
    }
    level(&mut r, elem, &dims, names)
}

/// A range in its text form: `[1,5)`, `empty`, `(,"2024-01-01 00:00:00")`.
fn range_text(elem: &Type, raw: &[u8], names: &RegNames) -> Result<String, String> {
    let mut r = Reader { raw };
    let flags = r.take(1)?[0];
    if flags & 0x01 != 0 {
        return Ok("empty".to_string());
    }
    let mut bound = |infinite: bool| -> Result<String, String> {
        if infinite {
            return Ok(String::new());
        }
        let raw = r.element()?;
        let value = element(elem, raw, names)?;
        Ok(quoted(
            &value.pg_text().unwrap_or_default(),
            &['(', ')', '[', ']', ','],
        ))
    };
    let lower = bound(flags & 0x08 != 0)?;
    let upper = bound(flags & 0x10 != 0)?;
    Ok(format!(
        "{}{lower},{upper}{}",
        if flags & 0x02 != 0 { '[' } else { '(' },
        if flags & 0x04 != 0 { ']' } else { ')' }
    ))
}

/// A record's or composite's fields, each in its text form.
fn record_fields(raw: &[u8], names: &RegNames) -> Result<Vec<Value>, String> {
    let mut r = Reader { raw };
    let n = usize::try_from(r.i32()?).map_err(|e| e.to_string())?;
    let mut fields = Vec::with_capacity(n.min(1 << 12));
    for _ in 0..n {
        let oid = r.u32()?;
        let raw = r.element()?;
        let value = match (raw, Type::from_oid(oid)) {
            (None, _) => Value::Null,
            (Some(raw), Some(ty)) => match element(&ty, Some(raw), names)?.pg_text() {
                Some(text) => Value::Text(text),
                None => Value::Null,
            },
            (Some(_), None) => {
                return Err(format!(
                    "a field is of type {oid}, which cannot be read inside a record"
                ))
            }
        };
        fields.push(value);
    }
    Ok(fields)
}

/// An `inet` or `cidr` in its text form: `10.0.0.1`, `10.0.0.1/8`, `10.0.0.0/8`, `::1`.
fn inet_text(raw: &[u8]) -> Result<String, String> {
    let mut r = Reader { raw };
    let head = r.take(4)?;
    let (family, bits, is_cidr, len) = (head[0], head[1], head[2] != 0, head[3]);
    let addr = r.take(usize::from(len))?;
    let (text, max) = match family {
        2 => (
            std::net::Ipv4Addr::from(<[u8; 4]>::try_from(addr).map_err(|e| e.to_string())?)
                .to_string(),
            32,
        ),
        3 => (
            std::net::Ipv6Addr::from(<[u8; 16]>::try_from(addr).map_err(|e| e.to_string())?)
                .to_string(),
            128,
        ),
        other => return Err(format!("unknown address family {other}")),
    };
    Ok(if is_cidr || bits != max {
        format!("{text}/{bits}")
    } else {
        text
    })
}

/// A `timetz` in its text form: `12:00:00+02`, `01:02:03.5-05:30`.
fn timetz_text(raw: &[u8]) -> Result<String, String> {
    let mut r = Reader { raw };
    let micros = i64::from_be_bytes(be(r.take(8)?)?);
    // Seconds west of Greenwich: the offset's sign is the other way round.
    let west = r.i32()?;
    let sign = if west > 0 { '-' } else { '+' };
    let abs = west.unsigned_abs();
    let (h, m, sec) = (abs / 3600, (abs / 60) % 60, abs % 60);
    let mut zone = format!("{sign}{h:02}");
    if m != 0 || sec != 0 {
        zone.push_str(&format!(":{m:02}"));
    }
    if sec != 0 {
        zone.push_str(&format!(":{sec:02}"));
    }
    Ok(format!("{}{zone}", time_text(micros)))
}

/// A `money` amount as the `C` locale prints it: `$1,234.56`, `-$0.05`.
fn money_text(cents: i64) -> String {
    let abs = cents.unsigned_abs();
    let digits = (abs / 100).to_string();
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let sign = if cents < 0 { "-" } else { "" };
    format!("{sign}${grouped}.{:02}", abs % 100)
}

/// A `bit` or `bit varying` in its text form: `101`.
fn bits_text(raw: &[u8]) -> Result<String, String> {
    let mut r = Reader { raw };
    let n = usize::try_from(r.i32()?).map_err(|e| e.to_string())?;
    let bytes = r.take(n.div_ceil(8))?;
    Ok((0..n)
        .map(|i| {
            if bytes[i / 8] & (0x80 >> (i % 8)) != 0 {
                '1'
            } else {
                '0'
            }
        })
        .collect())
}

/// A double as Postgres prints it: the shortest digits that read back the same, in
/// exponent form below 1e-4 and from 1e15 on (`1e+15`, `1.5e-05`).
fn float8_text(v: f64) -> String {
    if !v.is_finite() {
        return float_text(v);
    }
    let sci = format!("{v:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if v != 0.0 && !(-4..15).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.unsigned_abs())
    } else {
        format!("{v}")
    }
}

/// The text form of a geometric value (`point`, `lseg`, `box`, `path`, `polygon`, `line`,
/// `circle`) from its binary form, a run of doubles.
fn geometry_text(ty: &Type, raw: &[u8]) -> Result<String, String> {
    let mut r = Reader { raw };
    let mut f =
        || -> Result<String, String> { Ok(float8_text(f64::from_be_bytes(be(r.take(8)?)?))) };
    let point = |f: &mut dyn FnMut() -> Result<String, String>| -> Result<String, String> {
        Ok(format!("({},{})", f()?, f()?))
    };
    Ok(match *ty {
        Type::POINT => point(&mut f)?,
        Type::LSEG => format!("[{},{}]", point(&mut f)?, point(&mut f)?),
        Type::BOX => format!("{},{}", point(&mut f)?, point(&mut f)?),
        Type::LINE => format!("{{{},{},{}}}", f()?, f()?, f()?),
        Type::CIRCLE => format!("<{},{}>", point(&mut f)?, f()?),
        Type::PATH | Type::POLYGON => {
            let closed = *ty == Type::POLYGON || r.take(1)?[0] != 0;
            let n = usize::try_from(r.i32()?).map_err(|e| e.to_string())?;
            let mut points = Vec::with_capacity(n.min(1 << 16));
            for _ in 0..n {
                let x = float8_text(f64::from_be_bytes(be(r.take(8)?)?));
                let y = float8_text(f64::from_be_bytes(be(r.take(8)?)?));
                points.push(format!("({x},{y})"));
            }
            let (open, close) = if closed { ('(', ')') } else { ('[', ']') };
            format!("{open}{}{close}", points.join(","))
        }
        _ => return Err(format!("{} is not a geometric type", ty.name())),
    })
}

/// A `tsvector` in its text form: `'a' 'b':1,3A`.
fn tsvector_text(raw: &[u8]) -> Result<String, String> {
    let mut r = Reader { raw };
    let n = usize::try_from(r.i32()?).map_err(|e| e.to_string())?;
    let mut words = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        let end = r
            .raw
            .iter()
            .position(|b| *b == 0)
            .ok_or("a lexeme without its end")?;
        let lexeme = utf8(r.take(end)?)?;
        r.take(1)?;
        let count = u16::from_be_bytes(be(r.take(2)?)?);
        let mut word = String::from("'");
        for c in lexeme.chars() {
            if c == '\'' || c == '\\' {
                word.push(c);
            }
            word.push(c);
        }
        word.push('\'');
        let mut positions = Vec::with_capacity(usize::from(count));
        for _ in 0..count {
            let entry = u16::from_be_bytes(be(r.take(2)?)?);
            let weight = match entry >> 14 {
                3 => "A",
                2 => "B",
                1 => "C",
                _ => "",
            };
            positions.push(format!("{}{weight}", entry & 0x3fff));
        }
        if !positions.is_empty() {
            word.push(':');
            word.push_str(&positions.join(","));
        }
        words.push(word);
    }
    Ok(words.join(" "))
}

fn hex_joined(raw: &[u8], sep: &str) -> String {
    raw.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(sep)
}

/// Whether `ty` is one of the OID-alias types (`regclass`, `regtype`, `regproc`...),
/// which a binary result carries as the OID alone, where their text is the object's name.
pub(crate) fn is_reg(ty: &Type) -> bool {
    matches!(
        *ty,
        Type::REGPROC
            | Type::REGPROCEDURE
            | Type::REGOPER
            | Type::REGOPERATOR
            | Type::REGCLASS
            | Type::REGTYPE
            | Type::REGNAMESPACE
            | Type::REGROLE
            | Type::REGCONFIG
            | Type::REGDICTIONARY
            | Type::REGCOLLATION
    )
}

/// Whether a column of type `ty` may hold an OID-alias value: one itself, an array of
/// them, or a record or composite (whose fields say their types only in each value).
pub(crate) fn may_hold_reg(ty: &Type) -> bool {
    let ty = base_type(ty);
    if is_reg(ty) || *ty == Type::RECORD {
        return true;
    }
    match ty.kind() {
        Kind::Array(elem) => may_hold_reg(elem),
        Kind::Composite(_) => true,
        _ => false,
    }
}

/// The names of OID-alias values, by (type OID, value OID), as the server prints them.
#[derive(Debug, Default)]
pub(crate) struct RegNames(HashMap<(u32, u32), String>);

impl RegNames {
    /// Records the name of `oid` as a value of the type with OID `type_oid`.
    pub(crate) fn insert(&mut self, type_oid: u32, oid: u32, name: String) {
        self.0.insert((type_oid, oid), name);
    }

    fn get(&self, type_oid: u32, oid: u32) -> Option<&str> {
        self.0.get(&(type_oid, oid)).map(String::as_str)
    }
}

/// Adds to `out` each OID-alias value in a binary value of type `ty` (its type's OID and
/// the value), looking into arrays, records and composites.
pub(crate) fn reg_oids(
    ty: &Type,
    raw: Option<&[u8]>,
    out: &mut BTreeSet<(u32, u32)>,
) -> Result<(), String> {
    let Some(raw) = raw else {
        return Ok(());
    };
    let ty = base_type(ty);
    if is_reg(ty) {
        out.insert((ty.oid(), u32::from_be_bytes(be(raw)?)));
        return Ok(());
    }
    let mut r = Reader { raw };
    match ty.kind() {
        Kind::Array(elem) if may_hold_reg(elem) => {
            let ndim = usize::try_from(r.i32()?).map_err(|e| e.to_string())?;
            let _has_nulls = r.i32()?;
            let _oid = r.u32()?;
            let mut count: usize = usize::from(ndim > 0);
            for _ in 0..ndim {
                count = count.saturating_mul(usize::try_from(r.i32()?).map_err(|e| e.to_string())?);
                let _lower = r.i32()?;
            }
            for _ in 0..count {
                reg_oids(elem, r.element()?, out)?;
            }
        }
        Kind::Composite(_) => record_oids(&mut r, out)?,
        _ if *ty == Type::RECORD => record_oids(&mut r, out)?,
        _ => {}
    }
    Ok(())
}

fn record_oids(r: &mut Reader<'_>, out: &mut BTreeSet<(u32, u32)>) -> Result<(), String> {
    let n = r.i32()?;
    for _ in 0..n {
        let oid = r.u32()?;
        let raw = r.element()?;
        if let Some(ty) = Type::from_oid(oid) {
            reg_oids(&ty, raw, out)?;
        }
    }
    Ok(())
}

/// Reads one binary column value of type `ty`; `Err(None)` when the type is unsupported.
/// The OID-alias types (`regclass`...) read as their OID's text: their names come from
/// [`decode_named`].
#[cfg(test)]
pub(crate) fn decode(ty: &Type, raw: Option<&[u8]>) -> Result<Value, Option<String>> {
    decode_named(ty, raw, &RegNames::default())
}

/// Reads one binary column value like [`decode`], the OID-alias types (`regclass`,
/// `regtype`...) as their names in `names`, which [`reg_oids`] says to look up.
pub(crate) fn decode_named(
    ty: &Type,
    raw: Option<&[u8]>,
    names: &RegNames,
) -> Result<Value, Option<String>> {
    let Some(raw) = raw else {
        return Ok(Value::Null);
    };
    let ty = base_type(ty);
    let vector = *ty == Type::OID_VECTOR || *ty == Type::INT2_VECTOR;
    match ty.kind() {
        Kind::Enum(_) => return utf8(raw).map(Value::Text).map_err(Some),
        Kind::Array(_) if vector => {}
        Kind::Array(elem) => return array(elem, raw, names).map_err(Some),
        Kind::Range(elem) => return range_text(elem, raw, names).map(Value::Text).map_err(Some),
        Kind::Multirange(range) => {
            let Kind::Range(elem) = range.kind() else {
                return Err(None);
            };
            let mut r = Reader { raw };
            let n = usize::try_from(r.i32().map_err(Some)?).map_err(|e| Some(e.to_string()))?;
            let mut parts = Vec::with_capacity(n.min(1 << 12));
            for _ in 0..n {
                let part = r.element().map_err(Some)?.unwrap_or_default();
                parts.push(range_text(elem, part, names).map_err(Some)?);
            }
            return Ok(Value::Text(format!("{{{}}}", parts.join(","))));
        }
        Kind::Composite(_) => {
            return record_fields(raw, names)
                .map(|f| Value::Text(record_text(&f)))
                .map_err(Some)
        }
        _ => {}
    }
    if ty.name() == "citext" {
        return utf8(raw).map(Value::Text).map_err(Some);
    }
    let v = match *ty {
        Type::VOID => Value::Null,
        Type::BOOL => Value::Bool(raw.first().is_some_and(|b| *b != 0)),
        Type::INT2 => Value::Int(i16::from_be_bytes(be(raw)?).into()),
        Type::INT4 => Value::Int(i32::from_be_bytes(be(raw)?).into()),
        Type::INT8 => Value::Int(i64::from_be_bytes(be(raw)?)),
        Type::OID => Value::Int(u32::from_be_bytes(be(raw)?).into()),
        // The OID-alias types arrive as their OID in binary; psycopg reads the server's
        // text, the object's name, which the connection looked up (see `reg_oids`).
        _ if is_reg(ty) => {
            let oid = u32::from_be_bytes(be(raw)?);
            Value::Text(
                names
                    .get(ty.oid(), oid)
                    .map_or_else(|| oid.to_string(), str::to_string),
            )
        }
        // Types psycopg reads as their text.
        Type::XID | Type::CID => Value::Text(u32::from_be_bytes(be(raw)?).to_string()),
        Type::XID8 => Value::Text(u64::from_be_bytes(be(raw)?).to_string()),
        Type::TID => {
            let mut r = Reader { raw };
            let block = r.u32()?;
            let offset = u16::from_be_bytes(be(r.take(2)?)?);
            Value::Text(format!("({block},{offset})"))
        }
        Type::OID_VECTOR | Type::INT2_VECTOR => {
            let elem = if *ty == Type::OID_VECTOR {
                Type::OID
            } else {
                Type::INT2
            };
            let Value::Array(items) = array(&elem, raw, names)? else {
                return Err(Some("a vector that is not an array".to_string()));
            };
            let texts: Vec<String> = items.iter().filter_map(Value::pg_text).collect();
            Value::Text(texts.join(" "))
        }
        // The shortest decimal that reads back as the same `real`, as Postgres prints it
        // (0.1, not 0.10000000149011612).
        Type::FLOAT4 => Value::Float(float4(f32::from_be_bytes(be(raw)?))),
        Type::FLOAT8 => Value::Float(f64::from_be_bytes(be(raw)?)),
        Type::TEXT
        | Type::VARCHAR
        | Type::BPCHAR
        | Type::NAME
        | Type::UNKNOWN
        | Type::CHAR
        | Type::XML => Value::Text(utf8(raw)?),
        Type::BYTEA => Value::Bytes(raw.to_vec()),
        Type::JSON => Value::Json(Box::new(
            serde_json::from_slice(raw).map_err(|e| e.to_string())?,
        )),
        Type::JSONB => {
            let body = match raw.split_first() {
                Some((1, body)) => body,
                _ => return Err(Some("unknown jsonb version".to_string())),
            };
            Value::Json(Box::new(
                serde_json::from_slice(body).map_err(|e| e.to_string())?,
            ))
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
        Type::TIMETZ => Value::Text(timetz_text(raw)?),
        Type::INTERVAL => {
            let mut r = Reader { raw };
            let micros = i64::from_be_bytes(be(r.take(8)?)?);
            let days = r.i32()?;
            let months = r.i32()?;
            Value::Interval {
                months,
                days,
                micros,
            }
        }
        Type::UUID => Value::Text(uuid_text(raw)?),
        Type::NUMERIC => Value::Numeric(numeric_text(raw)?),
        Type::INET | Type::CIDR => Value::Text(inet_text(raw)?),
        Type::MONEY => Value::Text(money_text(i64::from_be_bytes(be(raw)?))),
        Type::MACADDR | Type::MACADDR8 => Value::Text(hex_joined(raw, ":")),
        Type::BIT | Type::VARBIT => Value::Text(bits_text(raw)?),
        Type::PG_LSN => {
            let lsn = u64::from_be_bytes(be(raw)?);
            Value::Text(format!("{:X}/{:X}", lsn >> 32, lsn & 0xFFFF_FFFF))
        }
        Type::RECORD => Value::Record(record_fields(raw, names)?),
        Type::POINT
        | Type::LSEG
        | Type::BOX
        | Type::PATH
        | Type::POLYGON
        | Type::LINE
        | Type::CIRCLE => Value::Text(geometry_text(ty, raw)?),
        Type::TS_VECTOR => Value::Text(tsvector_text(raw)?),
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
            Ok(Value::from(serde_json::json!({"a": 1})))
        );
        assert_eq!(decode(&Type::TSQUERY, Some(&[1])), Err(None));
        // NULL of any type reads, even of a type without a decoder.
        assert_eq!(decode(&Type::TSQUERY, None), Ok(Value::Null));
        assert!(decode(&Type::INT8, Some(&[1])).is_err());
    }

    #[test]
    fn a_value_stays_small() {
        // A result holds one Value per cell: a large variant (serde_json's ordered map)
        // would weigh on every cell of every row.
        assert!(std::mem::size_of::<Value>() <= 32);
    }

    #[test]
    fn float4_reads_as_postgres_prints_it() {
        let raw = 0.1f32.to_be_bytes();
        assert_eq!(decode(&Type::FLOAT4, Some(&raw)), Ok(Value::Float(0.1)));
        let raw = f32::INFINITY.to_be_bytes();
        assert_eq!(
            decode(&Type::FLOAT4, Some(&raw)),
            Ok(Value::Float(f64::INFINITY))
        );
    }

    #[test]
    fn json_keeps_big_integers_and_key_order() {
        let raw = br#"{"n": 1180591620717411303424, "b": 1, "a": 2}"#;
        let Ok(Value::Json(v)) = decode(&Type::JSON, Some(raw)) else {
            panic!("json did not decode");
        };
        assert_eq!(v.to_string(), r#"{"n":1180591620717411303424,"b":1,"a":2}"#);
    }

    fn array_raw(elem_oid: u32, dims: &[i32], items: &[Option<&[u8]>]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&(dims.len() as i32).to_be_bytes());
        v.extend_from_slice(&1i32.to_be_bytes());
        v.extend_from_slice(&elem_oid.to_be_bytes());
        for d in dims {
            v.extend_from_slice(&d.to_be_bytes());
            v.extend_from_slice(&1i32.to_be_bytes());
        }
        for item in items {
            match item {
                None => v.extend_from_slice(&(-1i32).to_be_bytes()),
                Some(b) => {
                    v.extend_from_slice(&(b.len() as i32).to_be_bytes());
                    v.extend_from_slice(b);
                }
            }
        }
        v
    }

    #[test]
    fn arrays_intervals_and_text_forms() {
        let one = 1i32.to_be_bytes();
        let two = 2i32.to_be_bytes();
        let raw = array_raw(23, &[2, 2], &[Some(&one), Some(&two), None, Some(&one)]);
        let v = decode(&Type::INT4_ARRAY, Some(&raw)).unwrap_or(Value::Null);
        assert_eq!(
            v,
            Value::Array(vec![
                Value::Array(vec![Value::Int(1), Value::Int(2)]),
                Value::Array(vec![Value::Null, Value::Int(1)]),
            ])
        );
        assert_eq!(v.pg_text().as_deref(), Some("{{1,2},{NULL,1}}"));
        assert_eq!(v.declared_type(), Type::INT2_ARRAY);
        let empty = array_raw(23, &[], &[]);
        assert_eq!(
            decode(&Type::INT4_ARRAY, Some(&empty)),
            Ok(Value::Array(vec![]))
        );
        let texts = Value::Array(vec!["a b".into(), "".into(), "x\"y".into(), Value::Null]);
        assert_eq!(
            texts.pg_text().as_deref(),
            Some(r#"{"a b","","x\"y",NULL}"#)
        );
        assert_eq!(texts.declared_type(), Type::UNKNOWN);
        assert_eq!(
            interval_text(14, 3, 14_706_500_000),
            "1 year 2 mons 3 days 04:05:06.5"
        );
        assert_eq!(interval_text(0, -1, -7_200_000_000), "-1 days -02:00:00");
        assert_eq!(interval_text(0, 0, 0), "00:00:00");
        let mut raw = Vec::new();
        raw.extend_from_slice(&3_000_000i64.to_be_bytes());
        raw.extend_from_slice(&1i32.to_be_bytes());
        raw.extend_from_slice(&0i32.to_be_bytes());
        assert_eq!(
            decode(&Type::INTERVAL, Some(&raw)),
            Ok(Value::Interval {
                months: 0,
                days: 1,
                micros: 3_000_000
            })
        );
        assert_eq!(money_text(123_456_789), "$1,234,567.89");
        assert_eq!(money_text(-5), "-$0.05");
        assert_eq!(
            inet_text(&[2, 8, 0, 4, 10, 0, 0, 1]).as_deref(),
            Ok("10.0.0.1/8")
        );
        assert_eq!(
            inet_text(&[2, 32, 0, 4, 10, 0, 0, 1]).as_deref(),
            Ok("10.0.0.1")
        );
        assert_eq!(
            inet_text(&[2, 32, 1, 4, 10, 0, 0, 1]).as_deref(),
            Ok("10.0.0.1/32")
        );
        let mut tz = Vec::new();
        tz.extend_from_slice(&(12i64 * 3_600_000_000).to_be_bytes());
        tz.extend_from_slice(&(-7200i32).to_be_bytes());
        assert_eq!(timetz_text(&tz).as_deref(), Ok("12:00:00+02"));
        assert_eq!(Value::Int(40_000).declared_type(), Type::INT4);
        assert_eq!(Value::Int(1 << 40).declared_type(), Type::INT8);
        assert_eq!(
            Value::Timestamp {
                micros: 0,
                time_zone: true
            }
            .declared_type(),
            Type::TIMESTAMPTZ
        );
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
