<?php
// eZSQLite3QueuedDB on the stand-ins in its own process. argv: site root
// (cwd, var/log), database path, settings JSON file, scenario:
//   "publish N"  : N transactions, each an INSERT; prints the rows
//   "standard"   : one transaction with eZDB's standard error handling
//                  (a failed start prints the error page and exits 1)
list( , $site, $path, $ini, $scenario ) = $argv;
$count = isset( $argv[5] ) ? (int)$argv[5] : 1;
putenv( "WL_EZINI=$ini" );
chdir( $site );
require __DIR__ . '/../standins/autoload.php';
$ezdb = new eZSQLite3QueuedDB( array( 'database' => $path ) );
if ( $scenario === 'publish' )
{
    $ezdb->setErrorHandling( eZDB::ERROR_HANDLING_EXCEPTIONS );
}
for ( $i = 0; $i < $count; $i++ )
{
    $ezdb->begin();
    $ezdb->query( "INSERT INTO pub (worker, seq) VALUES ('$scenario', $i)" );
    $ezdb->commit();
}
$rows = $ezdb->arrayQuery( "SELECT COUNT(*) AS n FROM pub WHERE worker = '$scenario'" );
echo json_encode( array( 'rows' => (int)$rows[0]['n'], 'queue' => $ezdb->writerQueue() !== null ) ), "\n";
