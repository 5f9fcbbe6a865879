<?php
// One editor publishing argv[3] times: each publish reads, then writes, in
// one transaction. argv: database path, mode ("queue": WriterLock\Queue;
// "plain": a plain deferred BEGIN with a 5 s busy timeout, as before the
// queue; "driver": eZSQLite3QueuedDB on the stand-ins; "pdo": WriterLock\Queue
// on a PDO in its default error mode (exceptions), begin()/commit();
// "pdo-silent": a PDO in ERRMODE_SILENT through Queue::transaction()),
// count, worker name.
// Prints "ready", waits for a line on stdin, publishes, prints JSON.
list( , $path, $mode, $count, $worker ) = $argv;
$result = array( 'pid' => getmypid(), 'committed' => 0, 'failed' => 0, 'errors' => array(), 'waits' => array() );

if ( $mode === 'driver' )
{
    require __DIR__ . '/../standins/autoload.php';
    $ezdb = new eZSQLite3QueuedDB( array( 'database' => $path ) );
    $ezdb->setErrorHandling( eZDB::ERROR_HANDLING_EXCEPTIONS );
}
elseif ( $mode === 'pdo' || $mode === 'pdo-silent' )
{
    $db = new PDO( "sqlite:$path" );
    if ( $mode === 'pdo-silent' )
    {
        $db->setAttribute( PDO::ATTR_ERRMODE, PDO::ERRMODE_SILENT );
    }
    $queue = new WriterLock\Queue( $path );
}
else
{
    $db = new SQLite3( $path );
    $db->busyTimeout( 5000 );
    $queue = $mode === 'queue' ? new WriterLock\Queue( $path ) : null;
}
echo "ready\n";
fflush( STDOUT );
fgets( STDIN );

for ( $i = 1; $i <= (int)$count; $i++ )
{
    $start = microtime( true );
    try
    {
        if ( $mode === 'driver' )
        {
            $ezdb->begin();
            $seen = $ezdb->arrayQuery( 'SELECT COUNT(*) AS n FROM pub' );
            usleep( 1000 );
            $ezdb->query( "INSERT INTO pub (worker, seq, seen) VALUES ('$worker', $i, " . (int)$seen[0]['n'] . ")" );
            $ezdb->commit();
            $result['committed']++;
        }
        elseif ( $mode === 'pdo' )
        {
            $queue->begin( $db );
            $result['waits'][] = $queue->lastWait();
            $seen = $db->query( 'SELECT COUNT(*) FROM pub' )->fetchColumn();
            usleep( 1000 );
            $db->exec( "INSERT INTO pub (worker, seq, seen) VALUES ('$worker', $i, $seen)" );
            if ( !$queue->commit( $db ) )
            {
                throw new RuntimeException( 'COMMIT refused: ' . $db->errorInfo()[2] );
            }
            $result['committed']++;
        }
        elseif ( $mode === 'pdo-silent' )
        {
            $queue->transaction( $db, function ( PDO $db ) use ( $worker, $i ) {
                $read = $db->query( 'SELECT COUNT(*) FROM pub' );
                if ( $read === false )
                {
                    throw new RuntimeException( 'read failed: ' . $db->errorInfo()[2] );
                }
                $seen = $read->fetchColumn();
                usleep( 1000 );
                if ( $db->exec( "INSERT INTO pub (worker, seq, seen) VALUES ('$worker', $i, $seen)" ) === false )
                {
                    throw new RuntimeException( 'write failed: ' . $db->errorInfo()[2] );
                }
            } );
            $result['waits'][] = $queue->lastWait();
            $result['committed']++;
        }
        elseif ( $mode === 'queue' )
        {
            $queue->begin( $db, 25 );
            $result['waits'][] = $queue->lastWait();
            $seen = $db->querySingle( 'SELECT COUNT(*) FROM pub' );
            usleep( 1000 );
            $db->exec( "INSERT INTO pub (worker, seq, seen) VALUES ('$worker', $i, $seen)" );
            if ( !$queue->commit( $db ) )
            {
                throw new RuntimeException( 'COMMIT refused: ' . $db->lastErrorMsg() );
            }
            $result['committed']++;
        }
        else
        {
            $ok = @$db->exec( 'BEGIN' );
            $seen = $ok ? @$db->querySingle( 'SELECT COUNT(*) FROM pub' ) : false;
            usleep( 1000 );
            $ok = $ok && $seen !== false
                && @$db->exec( "INSERT INTO pub (worker, seq, seen) VALUES ('$worker', $i, $seen)" )
                && @$db->exec( 'COMMIT' );
            if ( !$ok )
            {
                $message = $db->lastErrorMsg();
                @$db->exec( 'ROLLBACK' );
                throw new RuntimeException( $message );
            }
            $result['committed']++;
        }
    }
    catch ( Throwable $e )
    {
        $result['failed']++;
        $result['errors'][] = get_class( $e ) . ': ' . $e->getMessage();
    }
    $result['times'][] = microtime( true ) - $start;
}
echo json_encode( $result ), "\n";
