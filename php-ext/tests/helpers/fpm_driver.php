<?php
// A PHP-FPM request that writes through eZSQLite3QueuedDB on the stand-ins,
// with the web request's settings. Query string: db, dir (the site root,
// for var/log), ini (JSON settings file), what ("transaction" or
// "statement"), limit (optional: the request's max_execution_time, set with
// set_time_limit()). Answers JSON with the outcome.
if ( isset( $_GET['limit'] ) )
{
    set_time_limit( (int)$_GET['limit'] );
}
putenv( 'WL_EZINI=' . $_GET['ini'] );
chdir( $_GET['dir'] );
require __DIR__ . '/../standins/autoload.php';
$ezdb = new eZSQLite3QueuedDB( array( 'database' => $_GET['db'] ) );
$ezdb->setErrorHandling( eZDB::ERROR_HANDLING_EXCEPTIONS );
$start = microtime( true );
$out = array( 'sapi' => PHP_SAPI, 'pid' => getmypid(), 'loaded' => extension_loaded( 'writerlock' ) );
if ( $_GET['what'] === 'transaction' )
{
    try
    {
        $ezdb->begin();
        $ezdb->query( "INSERT INTO pub (worker, seq) VALUES ('fpm-driver', 1)" );
        $ezdb->commit();
        $out['result'] = 'committed';
    }
    catch ( eZDBException $e )
    {
        $out['result'] = 'eZDBException';
        $out['message'] = $e->getMessage();
        $out['code'] = $e->getCode();
    }
    $out['counter'] = $ezdb->transactionCounter();
}
else
{
    $out['result'] = $ezdb->query( "INSERT INTO pub (worker, seq) VALUES ('fpm-driver-statement', 1)" ) ? 'ran' : 'failed';
    $out['message'] = $ezdb->errorMessage();
}
$out['elapsed'] = microtime( true ) - $start;
header( 'Content-Type: application/json' );
echo json_encode( $out );
