--TEST--
waits that run out: exact text, fields, nothing written
--EXTENSIONS--
sqlite3
pcntl
posix
writerlock
--FILE--
<?php
require __DIR__ . '/timeout_test.php';
?>
--EXPECTF--
ok - begin() gives up after its wait: exact text and fields, nothing written (%f s)
ok - a wait below 1 s is raised to 1 s; a custom setting name is quoted (%f s)
ok - exec() of a write gives up after the busy timeout and does not run (%f s)
ok - after the holder commits, the same queue begins at once and nothing of the timed-out work is there (%f s)
ok - a writer outside the queue (BEGIN IMMEDIATE in another process) is waited for within the wait (%f s)
