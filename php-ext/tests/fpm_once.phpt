--TEST--
PHP-FPM: what the queued driver says once per process is logged once per worker, not once per request
--EXTENSIONS--
sqlite3
posix
writerlock
--FILE--
<?php
require __DIR__ . '/fpm_once_test.php';
?>
--EXPECTF--
ok - a worker without the extension: "not loaded" is logged once over 4 requests, each of which commits (%f s)
ok - a worker whose SQLiteTransactionWait is not below max_execution_time: logged once over 4 requests, each of which commits (%f s)
ok - the pools logged no PHP warning or notice (%f s)
