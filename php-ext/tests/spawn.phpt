--TEST--
a program started by a writer that died keeps none of its lock files (exec(), proc_open())
--EXTENSIONS--
sqlite3
pcntl
posix
writerlock
--FILE--
<?php
require __DIR__ . '/spawn_test.php';
?>
--EXPECTF--
ok - a program started with exec() (a shell through posix_spawn) by a holder that died does not keep the turn (%f s)
ok - a program started with proc_open() by a holder that died does not keep the turn (%f s)
