//! One statement run for many parameter rows, many statements to a message.
//!
//! Each row's statement is written out with its parameters as SQL literals of the types
//! they declare (the same types an [`execute`](Connection::execute) declares for them), and
//! the statements go as simple-query messages of up to [`MANY_PER_MESSAGE`] statements: one
//! round trip per message instead of one per row, as a pipeline would give.

use super::connection::Connection;
use super::error::Error;
use super::placeholder::{inline, parameter_count};
use super::value::Value;

/// The most statements one message carries.
pub const MANY_PER_MESSAGE: usize = 1000;

/// The size, in bytes, past which a message is sent without waiting for more statements.
const MESSAGE_BYTES: usize = 1 << 20;

impl Connection {
    /// Runs `sql` once per parameter row and returns the rows changed in all. The
    /// statements go [`MANY_PER_MESSAGE`] to a message; outside a transaction each message
    /// is one transaction of its own (all its statements or none). A row whose parameter
    /// count does not fit fails before anything is sent.
    pub fn execute_many(&mut self, sql: &str, rows: &[Vec<Value>]) -> Result<u64, Error> {
        let mut statements = Vec::with_capacity(rows.len());
        for params in rows {
            match inline(sql, params) {
                Some(statement) => statements.push(statement),
                None => {
                    return Err(Error::ParameterCount {
                        expected: parameter_count(sql),
                        given: params.len(),
                    })
                }
            }
        }
        let mut total = 0;
        let mut message = String::new();
        let mut count = 0;
        for statement in statements {
            if !message.is_empty() {
                message.push_str(";\n");
            }
            message.push_str(&statement);
            count += 1;
            if count == MANY_PER_MESSAGE || message.len() >= MESSAGE_BYTES {
                total += self.execute_batch_counted(&message)?;
                message.clear();
                count = 0;
            }
        }
        if !message.is_empty() {
            total += self.execute_batch_counted(&message)?;
        }
        Ok(total)
    }
}
