<?php
// Looks at a writer lock file from outside the queue (run without the
// extension): tries flock(LOCK_EX|LOCK_NB) on argv[1] (<db>.writer-lock)
// and prints "free" (and lets go at once) or "held". Exits 2 if the file
// cannot be opened or flock() fails otherwise.
$file = $argv[1];
$fp = @fopen( $file, 'r' );
if ( $fp === false )
{
    fwrite( STDERR, "cannot open $file\n" );
    exit( 2 );
}
if ( flock( $fp, LOCK_EX | LOCK_NB, $wouldBlock ) )
{
    flock( $fp, LOCK_UN );
    echo "free\n";
}
elseif ( $wouldBlock )
{
    echo "held\n";
}
else
{
    fwrite( STDERR, "flock($file) failed\n" );
    exit( 2 );
}
