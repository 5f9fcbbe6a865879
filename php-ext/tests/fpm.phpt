--TEST--
PHP-FPM workers: concurrent requests, kept handles, requests that end mid-transaction
--EXTENSIONS--
sqlite3
pcntl
posix
writerlock
--FILE--
<?php
require __DIR__ . '/fpm_test.php';
?>
--EXPECTF--
ok - php-fpm starts with the extension and a pool of workers (%f s)
# php-fpm: %s
ok - concurrent FastCGI requests each publish, and every one commits (%f s)
ok - each worker keeps its queue handle across requests (%f s)
ok - requests that end inside a transaction (exit, fatal error) leave no turn behind (%f s)
ok - the queued driver in a web request waits SQLiteTransactionWait, logs the exact text, fails with eZDBException (%f s)
ok - a web request whose SQLiteTransactionWait is not below max_execution_time: logged once, the wait ends before the limit (%f s)
ok - workers that kept their lock files wait for a writer holding a new one after rm or a rename over it (%f s)
ok - the pool logged no PHP warning or notice (%f s)
