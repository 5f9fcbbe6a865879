<?php
// A PHP-FPM request that publishes through the queue. Query string: db
// (database path), id (request number), mode ("publish", or "abandon" /
// "fatal": begin and end the request without committing). Answers JSON:
// the worker's pid, whether the worker already had the database's lock file
// open when the request started (the handle kept from an earlier request)
// and the descriptor, the worker's count of queued transactions, the wait.
$path = $_GET['db'];
$lock = $path . '.writer-lock';
$kept = null;
foreach ( glob( '/proc/self/fd/*' ) as $fd )
{
    if ( @readlink( $fd ) === $lock )
    {
        $kept = (int)basename( $fd );
    }
}
$db = new SQLite3( $path );
$db->busyTimeout( 5000 );
$queue = new WriterLock\Queue( $path );
$queue->begin( $db, 25 );
$wait = $queue->lastWait();
$seen = $db->querySingle( 'SELECT COUNT(*) FROM pub' );
usleep( 2000 );
$db->exec( "INSERT INTO pub (worker, seq, seen) VALUES ('fpm-" . getmypid() . "', " . (int)$_GET['id'] . ", $seen)" );
$mode = isset( $_GET['mode'] ) ? $_GET['mode'] : 'publish';
if ( $mode === 'abandon' )
{
    exit;                               // the turn must not outlive the request
}
if ( $mode === 'fatal' )
{
    undefined_function_in_a_request();
}
$committed = $queue->commit( $db );
ob_start();
phpinfo( INFO_MODULES );
$info = strip_tags( ob_get_clean() );
$begun = preg_match( '/Queued transactions begun by this process\s*(\d+)/', $info, $m ) ? (int)$m[1] : null;
header( 'Content-Type: application/json' );
echo json_encode( array( 'id' => (int)$_GET['id'], 'pid' => getmypid(), 'kept_fd' => $kept, 'committed' => $committed,
                         'begun' => $begun, 'wait' => $wait, 'sapi' => PHP_SAPI ) );
