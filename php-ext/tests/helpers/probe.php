<?php
// Begins and commits a queued transaction on a database; prints JSON
// {"ok":bool,"waited":seconds,"error":message}.
list( , $path, $wait ) = $argv;
$db = new SQLite3( $path );
$queue = new WriterLock\Queue( $path );
$start = microtime( true );
try
{
    $queue->begin( $db, (float)$wait );
    $queue->commit( $db );
    echo json_encode( array( 'ok' => true, 'waited' => microtime( true ) - $start, 'lastWait' => $queue->lastWait() ) ), "\n";
}
catch ( Throwable $e )
{
    echo json_encode( array( 'ok' => false, 'waited' => microtime( true ) - $start, 'error' => $e->getMessage(),
                             'class' => get_class( $e ), 'holder' => $e instanceof WriterLock\BusyException ? $e->holderPid() : null ) ), "\n";
}
