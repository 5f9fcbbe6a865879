<?php
// Run without the extension: watches a writer lock file (argv[1]) from
// outside the queue. Prints "held" once its flock(LOCK_EX|LOCK_NB) has failed,
// then waits in a blocking flock(LOCK_EX), which the kernel ends as the lock
// is let go, and prints "free <time>" (microtime when it took the lock). Lets
// go at once. The test that runs it ends it if it waits too long.
$file = $argv[1];
$fp = fopen( $file, 'r' );
if ( $fp === false )
{
    fwrite( STDERR, "cannot open $file\n" );
    exit( 2 );
}
if ( flock( $fp, LOCK_EX | LOCK_NB ) )
{
    echo "free before the test began\n";
    exit( 1 );
}
echo "held\n";
if ( !flock( $fp, LOCK_EX ) )
{
    fwrite( STDERR, "flock($file) failed\n" );
    exit( 2 );
}
$at = microtime( true );
flock( $fp, LOCK_UN );
printf( "free %.6f\n", $at );
