--TEST--
Queue::transaction(): begins, runs $fn($db), commits; any throwable rolls back, gives the turn back and is rethrown as it was
--EXTENSIONS--
pdo_sqlite
sqlite3
writerlock
--FILE--
<?php
require __DIR__ . '/lib.php';
$dir = tmpdir();
$path = make_db( $dir );

foreach ( array( 'SQLite3' => function () use ( $path ) { $db = new SQLite3( $path ); $db->enableExceptions( true ); return $db; },
                 'PDO' => function () use ( $path ) { return new PDO( "sqlite:$path" ); } ) as $class => $open )
{
    echo "-- $class\n";
    $db = $open();
    $q = new WriterLock\Queue( $path );
    $result = $q->transaction( $db, function ( $given ) use ( $db, $q, $class ) {
        var_dump( $given === $db, $q->holding() );
        $given->exec( "INSERT INTO pub (worker, seq) VALUES ('$class', 1)" );
        return array( 'id' => 7 );
    } );
    var_dump( $result, $q->holding(), count_rows( $path, "worker = '$class'" ) );

    $thrown = new DomainException( 'the page did not validate', 42 );
    try
    {
        $q->transaction( $db, function ( $db ) use ( $thrown, $class ) {
            $db->exec( "INSERT INTO pub (worker, seq) VALUES ('$class', 2)" );
            throw $thrown;
        }, 5 );
    }
    catch ( DomainException $e )
    {
        var_dump( $e === $thrown, $e->getCode() );
    }
    var_dump( $q->holding(), count_rows( $path, "worker = '$class'" ), probe_begin( $path, 1 )['ok'] );

    // A PHP error inside $fn (an \Error, not an exception) is rethrown the same way.
    try
    {
        $q->transaction( $db, function ( $db ) { $db->exec( "INSERT INTO pub (worker, seq) VALUES ('error', 1)" ); return intdiv( 1, 0 ); } );
    }
    catch ( DivisionByZeroError $e )
    {
        echo get_class( $e ), ': ', $e->getMessage(), "\n";
    }
    var_dump( $q->holding(), count_rows( $path, "worker = 'error'" ) );
}

echo "-- a COMMIT SQLite refuses: rolled back, turn back, WriterLock\\Exception\n";
$fk = "$dir/fk.db";
$db = new SQLite3( $fk );
$db->exec( 'CREATE TABLE p (id INTEGER PRIMARY KEY); CREATE TABLE c (pid INTEGER REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED); PRAGMA foreign_keys = ON' );
$q = new WriterLock\Queue( $fk );
try
{
    $q->transaction( $db, function ( $db ) { $db->exec( 'INSERT INTO c VALUES (7)' ); } );
}
catch ( WriterLock\Exception $e )
{
    echo get_class( $e ), ': ', $e->getMessage(), "\n";
}
var_dump( $q->holding(), $db->querySingle( 'SELECT COUNT(*) FROM c' ) );
// The same through PDO: the message is SQLite's, read from the connection's own handle
// (PDO's errorInfo() knows nothing of a COMMIT run there).
$pdo = new PDO( "sqlite:$fk" );
$pdo->exec( 'PRAGMA foreign_keys = ON' );
try
{
    $q->transaction( $pdo, function ( $pdo ) { $pdo->exec( 'INSERT INTO c VALUES (8)' ); } );
}
catch ( WriterLock\Exception $e )
{
    echo 'PDO: ', get_class( $e ), ': ', $e->getMessage(), "\n";
}
var_dump( $q->holding(), $db->querySingle( 'SELECT COUNT(*) FROM c' ) );

echo "-- \$fn ends the transaction itself: nothing false is reported, the turn is back\n";
$db = new SQLite3( $path );
$q = new WriterLock\Queue( $path );
var_dump( $q->transaction( $db, function ( $db ) use ( $q ) { $db->exec( "INSERT INTO pub (worker) VALUES ('own commit')" ); return $q->commit( $db ); } ) );
var_dump( $q->transaction( $db, function ( $db ) { $db->exec( "INSERT INTO pub (worker) VALUES ('raw commit')" ); return $db->exec( 'COMMIT' ); } ) );
var_dump( $q->holding(), count_rows( $path, "worker IN ('own commit', 'raw commit')" ), probe_begin( $path, 1 )['ok'] );

echo "-- the wait runs out: \$fn never runs\n";
$holder = start_holder( $path );
try
{
    $q = new WriterLock\Queue( $path );
    $q->transaction( new PDO( "sqlite:$path" ), function () { echo "fn ran\n"; }, 1.0 );
}
catch ( WriterLock\BusyException $e )
{
    echo busy_as_expected( 'database is busy: the transaction could not start within 1 s (waited 1.0 s, the waitSeconds argument of WriterLock\Queue::transaction()), another write held the lock all that time; nothing was written', $e->getMessage() ), "\n";
}
release_holder( $holder );

echo "-- bad arguments\n";
foreach ( array( function () use ( $q, $path ) { $q->transaction( new SQLite3( $path ), 'no_such_function' ); },
                 function () use ( $q, $path ) { $q->transaction( new SQLite3( $path ), function () {}, -1 ); } ) as $call )
{
    try { $call(); } catch ( Throwable $e ) { echo get_class( $e ), ': ', $e->getMessage(), "\n"; }
}
?>
--EXPECTF--
-- SQLite3
bool(true)
bool(true)
array(1) {
  ["id"]=>
  int(7)
}
bool(false)
int(1)
bool(true)
int(42)
bool(false)
int(1)
bool(true)
DivisionByZeroError: Division by zero
bool(false)
int(0)
-- PDO
bool(true)
bool(true)
array(1) {
  ["id"]=>
  int(7)
}
bool(false)
int(1)
bool(true)
int(42)
bool(false)
int(1)
bool(true)
DivisionByZeroError: Division by zero
bool(false)
int(0)
-- a COMMIT SQLite refuses: rolled back, turn back, WriterLock\Exception
WriterLock\Exception: COMMIT failed: FOREIGN KEY constraint failed; the transaction was rolled back, nothing was written
bool(false)
int(0)
PDO: WriterLock\Exception: COMMIT failed: FOREIGN KEY constraint failed; the transaction was rolled back, nothing was written
bool(false)
int(0)
-- $fn ends the transaction itself: nothing false is reported, the turn is back
bool(true)
bool(true)
bool(false)
int(2)
bool(true)
-- the wait runs out: $fn never runs
database is busy: the transaction could not start within 1 s (waited 1.0 s, the waitSeconds argument of WriterLock\Queue::transaction()), another write held the lock all that time; nothing was written
-- bad arguments
TypeError: WriterLock\Queue::transaction(): Argument #2 ($fn) must be a valid callback, string given
ValueError: WriterLock\Queue::transaction(): Argument #3 ($waitSeconds) must be a number of seconds from 0 up, -1 given
