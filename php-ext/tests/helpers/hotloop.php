<?php
// A job that commits and begins again at once (the indexcontent cronjob
// part, a content job's batches), for argv[2] seconds. Prints "running"
// after its first commit, then the number of transactions at the end.
list( , $path, $seconds ) = $argv;
$db = new SQLite3( $path );
$queue = new WriterLock\Queue( $path );
$end = microtime( true ) + (float)$seconds;
$n = 0;
while ( microtime( true ) < $end )
{
    $queue->begin( $db, 300, '[DatabaseSettings] SQLiteCLITransactionWait' );
    $db->exec( "INSERT INTO pub (worker, seq) VALUES ('hotloop', $n)" );
    $queue->commit( $db );
    if ( ++$n === 1 )
    {
        echo "running\n";
        fflush( STDOUT );
    }
}
echo "$n\n";
