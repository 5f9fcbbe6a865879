<?php
// Run without the extension: watches a writer lock file (argv[1]) from
// outside the queue. Prints "held" once its flock(LOCK_EX|LOCK_NB) has failed,
// then tries again every 0.2 ms until it succeeds (within argv[2] seconds,
// default 10) and prints "free <time>" (microtime when it took the lock),
// or "still held" after the limit. Lets go at once.
$file = $argv[1];
$limit = isset( $argv[2] ) ? (float)$argv[2] : 10.0;
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
$end = microtime( true ) + $limit;
while ( microtime( true ) < $end )
{
    if ( flock( $fp, LOCK_EX | LOCK_NB ) )
    {
        $at = microtime( true );
        flock( $fp, LOCK_UN );
        printf( "free %.6f\n", $at );
        exit( 0 );
    }
    usleep( 200 );
}
echo "still held\n";
