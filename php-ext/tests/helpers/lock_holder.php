<?php
// Holds a database's writer turn the way Exponential's driver protocol
// does, with plain PHP and no extension: an exclusive flock() on
// argv[1] (<db>.writer-lock), no SQLite connection, no transaction
// anywhere. Prints "held PID", lets go when told on stdin (or after
// argv[2] seconds), prints "released T" (T: the monotonic clock, hrtime in
// nanoseconds, read just before the unlock).
$file = $argv[1];
$fp = fopen( $file, 'c' );
if ( $fp === false || !flock( $fp, LOCK_EX ) )
{
    fwrite( STDERR, "cannot lock $file\n" );
    exit( 2 );
}
echo 'held ', getmypid(), "\n";
fflush( STDOUT );
if ( isset( $argv[2] ) )
{
    usleep( (int)( (float)$argv[2] * 1e6 ) );
}
else
{
    fgets( STDIN );
}
$releasing = hrtime( true );
flock( $fp, LOCK_UN );
echo "released $releasing\n";
