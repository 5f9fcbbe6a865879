//! The hand-off page as bytes, read and written the way another build of
//! the library (or another program) would: by the published field offsets,
//! never through the library's own view of the page.

use std::path::Path;

use writerlock::handoff::{Field, FIELDS, HEADER_BYTES, PAGE_BYTES, PAGE_IDENTITY, SLOT_BYTES};
use writerlock::lockfiles::queue_path;

/// The layout's field called `name` (panics when there is none).
pub fn field(name: &str) -> Field {
    *FIELDS
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no field {name}"))
}

/// Where a field lies in the page (`slot`: which slot, for slot fields).
pub fn at(f: Field, slot: usize) -> usize {
    if f.in_slot {
        HEADER_BYTES + slot * SLOT_BYTES + f.offset
    } else {
        f.offset
    }
}

/// Writes `value` into field `f` (of slot `slot` for slot fields), in its
/// size and native byte order.
pub fn put(page: &mut [u8], f: Field, slot: usize, value: u64) {
    let start = at(f, slot);
    if f.size == 8 {
        page[start..start + 8].copy_from_slice(&value.to_ne_bytes());
    } else {
        page[start..start + 4].copy_from_slice(&(value as u32).to_ne_bytes());
    }
}

/// Reads field `f` (of slot `slot` for slot fields).
pub fn get(page: &[u8], f: Field, slot: usize) -> u64 {
    let start = at(f, slot);
    if f.size == 8 {
        u64::from_ne_bytes(page[start..start + 8].try_into().expect("8 bytes"))
    } else {
        u64::from(u32::from_ne_bytes(
            page[start..start + 4].try_into().expect("4 bytes"),
        ))
    }
}

/// The boot the page's times count in (both halves of `boot`).
pub fn get_boot(page: &[u8]) -> u128 {
    let f = field("boot");
    let low = u64::from_ne_bytes(
        page[f.offset + 8..f.offset + 16]
            .try_into()
            .expect("8 bytes"),
    );
    (u128::from(get(page, f, 0)) << 64) | u128::from(low)
}

/// Stamps `boot` (both halves) into the page.
pub fn put_boot(page: &mut [u8], boot: u128) {
    let f = field("boot");
    put(page, f, 0, (boot >> 64) as u64);
    page[f.offset + 8..f.offset + 16].copy_from_slice(&(boot as u64).to_ne_bytes());
}

/// This boot's `/proc/sys/kernel/random/boot_id`, read here, as a number.
pub fn this_boot() -> u128 {
    let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").expect("boot_id");
    let hex: String = text.chars().filter(char::is_ascii_hexdigit).collect();
    u128::from_str_radix(&hex, 16).expect("a hexadecimal boot_id")
}

/// An empty page of this layout, its times counting in `boot`.
pub fn page_of_boot(boot: u128) -> Vec<u8> {
    let mut page = vec![0u8; PAGE_BYTES];
    put(&mut page, field("identity"), 0, PAGE_IDENTITY);
    put_boot(&mut page, boot);
    page
}

/// An empty page of this layout and this boot.
pub fn valid_page() -> Vec<u8> {
    page_of_boot(this_boot())
}

/// The queue file of `db` as it is now (panics unless it holds a whole page).
pub fn read_page(db: &Path) -> Vec<u8> {
    let bytes = std::fs::read(queue_path(db)).expect("read the queue file");
    assert!(bytes.len() >= PAGE_BYTES, "no page: {} bytes", bytes.len());
    bytes
}
