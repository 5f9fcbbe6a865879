--TEST--
the module, its classes, php --re/--ri and the exception classes
--EXTENSIONS--
sqlite3
pcntl
posix
writerlock
--FILE--
<?php
require __DIR__ . '/api_test.php';
?>
--EXPECTF--
ok - the module is called writerlock and reports the crate version (%f s)
ok - the module registers exactly the four WriterLock classes (%f s)
ok - php --re writerlock lists the API (%f s)
ok - phpinfo has a writerlock section with the version (%f s)
ok - the exceptions are RuntimeExceptions, Queue is final (%f s)
ok - exceptions thrown by the queue carry the caller's file and line (%f s)
ok - a BusyException made in PHP works like any exception (%f s)
ok - an in-memory database needs no lock files (%f s)
