<?php
// A PHP-FPM request that takes the writer turn with the worker's kept queue
// handle (WriterLock\Queue::acquire(), no SQLite) and gives it back at once.
// Query string: db (database path). Answers JSON: the worker's pid, the
// descriptor of the lock file the worker had open when the request started
// (null: none), and the monotonic clock (hrtime, nanoseconds) just after
// acquire() returned.
$path = $_GET['db'];
$lock = $path . '.writer-lock';
$kept = null;
foreach ( glob( '/proc/self/fd/*' ) as $fd )
{
    $target = (string)@readlink( $fd );
    if ( $target === $lock || $target === "$lock (deleted)" )
    {
        $kept = (int)basename( $fd );
    }
}
$queue = new WriterLock\Queue( $path );
$queue->acquire( 10.0 );
$enter = hrtime( true );
$queue->release();
header( 'Content-Type: application/json' );
echo json_encode( array( 'pid' => getmypid(), 'kept_fd' => $kept, 'enter' => $enter ) );
