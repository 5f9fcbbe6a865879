--TEST--
the IDE stubs match the extension
--EXTENSIONS--
sqlite3
pcntl
posix
writerlock
--FILE--
<?php
require __DIR__ . '/stubs_test.php';
?>
--EXPECTF--
ok - the stub file parses (%f s)
ok - the committed stubs are what generate.php makes from the extension (regenerate on drift) (%f s)
ok - composer.json installs the stubs for IDEs and PHPStan (%f s)
ok - the stubs match the extension's reflection (%f s)
ok - the issue's signatures, read from the extension (%f s)
