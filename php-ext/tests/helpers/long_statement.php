<?php
// Runs a statement that takes many seconds through WriterLock\Queue::exec(),
// with no PHP signal handler. argv: database path. Prints "running" first.
$db = new SQLite3( $argv[1] );
$queue = new WriterLock\Queue( $argv[1] );
echo "running\n";
fflush( STDOUT );
$queue->exec( $db, 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000000) SELECT count(*) FROM c', 5.0 );
echo "finished\n";
