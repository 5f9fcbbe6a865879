--TEST--
64 processes x 3 publishes through the queue, all committed
--EXTENSIONS--
sqlite3
pcntl
posix
writerlock
--FILE--
<?php
require __DIR__ . '/publish_test.php';
?>
--EXPECTF--
# queue: %s
ok - 64 processes x 3 publishes through the queue: all 192 commit (%f s)
# pdo: %s
ok - 64 processes x 3 publishes through the queue on PDO (exceptions), begin() and commit(): all 192 commit (%f s)
# pdo-silent: %s
ok - 64 processes x 3 publishes through the queue on PDO (ERRMODE_SILENT), transaction(): all 192 commit (%f s)
# plain BEGIN: %s
ok - the same load with a plain BEGIN loses some publishes (%f s)
ok - 32 processes x 3 publishes through the queued driver: all commit (%f s)
