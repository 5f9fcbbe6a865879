<?php
// A writer that holds the turn, starts a program that outlives it, and
// dies without letting go (SIGKILL: no commit, no shutdown code). argv:
// database path, how the program is started: "exec" (PHP's exec(), a
// shell through posix_spawn) or "proc_open" (PHP's proc_open(), fork and
// exec). Prints "spawned PID" (the program's pid) before it dies.
list( , $path, $how ) = $argv;
$db = new SQLite3( $path );
$queue = new WriterLock\Queue( $path );
$queue->begin( $db, 10 );
$db->exec( "INSERT INTO pub (worker, seq) VALUES ('spawn_and_die', 1)" );
if ( $how === 'exec' )
{
    $pid = (int)exec( 'sleep 30 > /dev/null 2>&1 < /dev/null & echo $!' );
}
else
{
    $proc = proc_open( array( 'sleep', '30' ), array( 0 => array( 'file', '/dev/null', 'r' ), 1 => array( 'file', '/dev/null', 'w' ), 2 => array( 'file', '/dev/null', 'w' ) ), $pipes );
    $pid = proc_get_status( $proc )['pid'];
}
echo "spawned $pid\n";
fflush( STDOUT );
posix_kill( getmypid(), SIGKILL );
