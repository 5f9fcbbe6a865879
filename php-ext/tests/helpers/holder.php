<?php
// Holds the writer turn on a database, then lets go: when told on stdin, or
// after argv[3] seconds. argv: database path, mode: "queue"
// (WriterLock\Queue::begin) or "sqlite" (a plain BEGIN IMMEDIATE, outside
// the queue), [seconds].
$path = $argv[1];
$mode = isset( $argv[2] ) ? $argv[2] : 'queue';
$db = new SQLite3( $path );
$db->busyTimeout( 10000 );
if ( $mode === 'sqlite' )
{
    $db->exec( 'BEGIN IMMEDIATE' );
}
else
{
    $queue = new WriterLock\Queue( $path );
    $queue->begin( $db, 10 );
}
echo 'held ', getmypid(), "\n";
fflush( STDOUT );
if ( isset( $argv[3] ) )
{
    usleep( (int)( (float)$argv[3] * 1e6 ) );
}
else
{
    fgets( STDIN );
}
if ( $mode === 'sqlite' )
{
    $db->exec( 'COMMIT' );
}
else
{
    $queue->commit( $db );
}
echo "released\n";
