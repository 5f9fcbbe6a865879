--TEST--
php-ext/install.sh from a fresh clone: dry run, a stripped install into a non-default extension directory honouring CARGO_TARGET_DIR, the next step, removal
--EXTENSIONS--
pdo_sqlite
writerlock
--FILE--
<?php
require __DIR__ . '/install_test.php';
?>
--EXPECTF--
ok - a dry run names every step and changes nothing (%f s)
# installed %f MB (the build with debug info: %f MB)
ok - a fresh clone installs a stripped build from CARGO_TARGET_DIR into a non-default extension directory, by absolute path (%f s)
ok - the next step the install prints loads the extension once, without "already loaded" (%f s)
ok - --remove takes it away (and --remove --dry-run does not) (%f s)
ok - --lib installs a prebuilt library without cargo or Rust on the PATH, and it runs a queued transaction; a file that is no PHP extension is refused (%f s)
ok - a bad option is refused with what to do (%f s)
