//! Every kind of the core's queue errors has its PHP exception class.

#[allow(dead_code)]
#[path = "../src/kinds.rs"]
mod kinds;

use kinds::{class_of, Kind};
use writerlock::ErrorKind;

#[test]
fn every_kind_has_its_class() {
    for kind in ErrorKind::ALL {
        let expected = match kind {
            ErrorKind::Busy => Kind::Busy,
            ErrorKind::NotStarted => Kind::Start,
            // WriterLock\Exception is the class of every other failure, each named by its
            // message.
            _ => Kind::Base,
        };
        assert_eq!(class_of(*kind), expected, "{kind:?}");
    }
}
