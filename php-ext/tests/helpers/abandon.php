<?php
// Begins a queued transaction and ends the script without committing, in
// the way argv[2] names: "exit", "fatal" (an uncaught error), "exception"
// (an uncaught exception), "kill" (SIGKILL to itself).
list( , $path, $how ) = $argv;
$db = new SQLite3( $path );
$queue = new WriterLock\Queue( $path );
$queue->begin( $db, 5 );
$db->exec( "INSERT INTO pub (worker, seq) VALUES ('abandoned', 1)" );
echo "began\n";
fflush( STDOUT );
switch ( $how )
{
    case 'exit':
        exit( 0 );
    case 'fatal':
        undefined_function_for_the_test();
        break;
    case 'exception':
        throw new RuntimeException( 'left in the middle' );
    case 'kill':
        posix_kill( getmypid(), SIGKILL );
        sleep( 5 );
}
