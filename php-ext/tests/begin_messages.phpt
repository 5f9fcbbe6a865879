--TEST--
begin(): a default wait of 25 s, and PHP's words for a second begin() and for a connection already in a transaction
--EXTENSIONS--
pdo_sqlite
sqlite3
writerlock
--FILE--
<?php
require __DIR__ . '/lib.php';
$path = make_db( tmpdir() );
$db = new SQLite3( $path );
$q = new WriterLock\Queue( $path );

echo "-- no wait given: 25 s (the busy timeout is the time left of it)\n";
$q->begin( $db );
$ms = $db->querySingle( 'PRAGMA busy_timeout' );
var_dump( $ms > 24000 && $ms <= 25000 );

echo "-- begin() twice on the same connection, then on another one\n";
foreach ( array( $db, new PDO( "sqlite:$path" ) ) as $again )
{
    $start = microtime( true );
    try
    {
        $q->begin( $again, 5 );
    }
    catch ( WriterLock\Exception $e )
    {
        echo get_class( $e ), ': ', $e->getMessage(), "\n";
    }
    var_dump( microtime( true ) - $start < 0.5, $q->holding() );
}
var_dump( $q->commit( $db ) );

echo "-- a connection inside a transaction begun outside the queue\n";
$pdo = new PDO( "sqlite:$path" );
$pdo->beginTransaction();
try
{
    $q->transaction( $pdo, function () { echo "fn ran\n"; } );
}
catch ( WriterLock\Exception $e )
{
    echo get_class( $e ), ': ', $e->getMessage(), "\n";
}
var_dump( $q->holding(), $pdo->inTransaction() );
$pdo->rollBack();
?>
--EXPECT--
-- no wait given: 25 s (the busy timeout is the time left of it)
bool(true)
-- begin() twice on the same connection, then on another one
WriterLock\Exception: WriterLock\Queue::begin(): this queue already holds the writer turn for a transaction it began on this connection; call commit() or rollback() on that connection before beginning another
bool(true)
bool(true)
WriterLock\Exception: WriterLock\Queue::begin(): this queue already holds the writer turn for a transaction it began on another connection; call commit() or rollback() on that connection before beginning another
bool(true)
bool(true)
bool(true)
-- a connection inside a transaction begun outside the queue
WriterLock\Exception: WriterLock\Queue::transaction(): the connection is already inside a transaction this queue did not begin (a BEGIN run directly, PDO::beginTransaction(), or another queue's); end it with COMMIT or ROLLBACK first. Nothing was written by this call
bool(false)
bool(true)
