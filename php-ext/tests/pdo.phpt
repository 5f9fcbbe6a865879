--TEST--
PDO (sqlite driver) is accepted wherever SQLite3 is, in every error mode, with the same turn, messages and exceptions
--EXTENSIONS--
pdo_sqlite
sqlite3
writerlock
--FILE--
<?php
require __DIR__ . '/lib.php';
$path = make_db( tmpdir() );
set_error_handler( function ( $no, $str ) { echo "PHP diagnostic: $str\n"; return true; } );

foreach ( array( 'default' => null, 'exception' => PDO::ERRMODE_EXCEPTION, 'silent' => PDO::ERRMODE_SILENT, 'warning' => PDO::ERRMODE_WARNING ) as $name => $mode )
{
    echo "-- $name\n";
    $pdo = new PDO( "sqlite:$path" );
    if ( $mode !== null )
    {
        $pdo->setAttribute( PDO::ATTR_ERRMODE, $mode );
    }
    $before = $pdo->getAttribute( PDO::ATTR_ERRMODE );
    $q = new WriterLock\Queue( $path );
    $q->begin( $pdo, 5 );
    var_dump( $q->holding() );
    var_dump( $pdo->query( 'PRAGMA busy_timeout' )->fetchColumn() > 4000 );
    $pdo->exec( "INSERT INTO pub (worker, seq) VALUES ('$name', 1)" );
    $other = probe_begin( $path, 0.2 );
    echo $other['ok'] ? "another process began inside our transaction\n" : "another process waited: {$other['class']}\n";
    var_dump( $q->commit( $pdo ), $q->holding() );
    $q->exec( $pdo, "INSERT INTO pub (worker, seq) VALUES ('$name', 2)", 1.0 );
    try
    {
        $q->exec( $pdo, 'INSERT INTO no_such_table VALUES (1)', 1.0 );
    }
    catch ( WriterLock\Exception $e )
    {
        echo get_class( $e ), ': ', $e->getMessage(), ' (code ', $e->getCode(), ")\n";
    }
    $q->begin( $pdo );
    $pdo->exec( "INSERT INTO pub (worker, seq) VALUES ('$name', 3)" );
    var_dump( $q->rollback( $pdo ) );
    echo count_rows( $path, "worker = '$name'" ), " rows; error mode kept: ", var_export( $pdo->getAttribute( PDO::ATTR_ERRMODE ) === $before, true ), "\n";
}

echo "-- a writer on SQLite3 and one on PDO take turns\n";
$holder = start_holder( $path );
$pdo = new PDO( "sqlite:$path" );
$q = new WriterLock\Queue( $path );
try
{
    $q->begin( $pdo, 1 );
}
catch ( WriterLock\BusyException $e )
{
    echo get_class( $e ), ': ', busy_as_expected( 'database is busy: the transaction could not start within 1 s (waited 1.0 s, the waitSeconds argument of WriterLock\Queue::begin()), another write held the lock all that time; nothing was written', $e->getMessage() ), "\n";
    var_dump( $e->getCode(), $e->holderPid() === $holder->pid, $e->setting() );
}
release_holder( $holder );
$q->begin( $pdo, 1 );
var_dump( $q->commit( $pdo ) );

echo "-- a PDO never connected\n";
class NoConnection extends PDO { function __construct() {} }
foreach ( array( new NoConnection() ) as $bad )
{
    try
    {
        $q->begin( $bad, 1 );
    }
    catch ( Throwable $e )
    {
        echo get_class( $e ), ': ', $e->getMessage(), "\n";
    }
}
?>
--EXPECTF--
-- default
bool(true)
bool(true)
another process waited: WriterLock\BusyException
bool(true)
bool(false)
WriterLock\Exception: the statement failed: no such table: no_such_table (code 1)
bool(true)
2 rows; error mode kept: true
-- exception
bool(true)
bool(true)
another process waited: WriterLock\BusyException
bool(true)
bool(false)
WriterLock\Exception: the statement failed: no such table: no_such_table (code 1)
bool(true)
2 rows; error mode kept: true
-- silent
bool(true)
bool(true)
another process waited: WriterLock\BusyException
bool(true)
bool(false)
WriterLock\Exception: the statement failed: no such table: no_such_table (code 1)
bool(true)
2 rows; error mode kept: true
-- warning
bool(true)
bool(true)
another process waited: WriterLock\BusyException
bool(true)
bool(false)
WriterLock\Exception: the statement failed: no such table: no_such_table (code 1)
bool(true)
2 rows; error mode kept: true
-- a writer on SQLite3 and one on PDO take turns
WriterLock\BusyException: database is busy: the transaction could not start within 1 s (waited 1.0 s, the waitSeconds argument of WriterLock\Queue::begin()), another write held the lock all that time; nothing was written
int(5)
bool(true)
string(53) "the waitSeconds argument of WriterLock\Queue::begin()"
bool(true)
-- a PDO never connected
WriterLock\StartException: the transaction could not start: the PDO object is not connected (its constructor did not run or failed); nothing was written
