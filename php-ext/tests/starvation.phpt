--TEST--
page saves next to a commit-begin hot loop get their turn
--EXTENSIONS--
sqlite3
pcntl
posix
writerlock
--FILE--
<?php
require __DIR__ . '/starvation_test.php';
?>
--EXPECTF--
# hot loop: %s
ok - page saves next to a commit-begin hot loop all get their turn quickly (%f s)
