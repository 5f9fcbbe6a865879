//! Gives libwriterlock.so its soname, so programs linked against it record
//! `libwriterlock.so.0` and keep working across compatible releases.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os == "linux" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libwriterlock.so.0");
    }
}
