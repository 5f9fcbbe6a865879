--TEST--
The module, its classes, php --re/--ri and phpinfo(), and the exception classes as plain PHP exceptions
--EXTENSIONS--
sqlite3
writerlock
--FILE--
<?php
require __DIR__ . '/lib.php';
$toml = file_get_contents( wl_root() . '/Cargo.toml' );
preg_match( '/\[workspace\.package\][^\[]*?version\s*=\s*"([^"]+)"/s', $toml, $m );
$version = $m[1];

echo "-- name and version\n";
var_dump( extension_loaded( 'writerlock' ), phpversion( 'writerlock' ) === $version );

echo "-- classes and functions\n";
$ext = new ReflectionExtension( 'writerlock' );
$classes = $ext->getClassNames();
sort( $classes );
echo implode( "\n", $classes ), "\n";
var_dump( $ext->getFunctions() );

echo "-- php --re writerlock\n";
$ini = array( '-d', 'extension=' . ext_path() );
exec( implode( ' ', array_map( 'escapeshellarg', array_merge( array( PHP_BINARY ), $ini, array( '--re', 'writerlock' ) ) ) ), $out, $rc );
$text = implode( "\n", $out );
var_dump( $rc );
foreach ( array( 'final class WriterLock\\Queue', 'class WriterLock\\BusyException extends WriterLock\\Exception',
                 'class WriterLock\\Exception extends RuntimeException', 'class WriterLock\\StartException extends WriterLock\\Exception',
                 'public method begin', 'public method transaction', 'static public method forConnection', 'public method commit',
                 'public method rollback', 'public method exec', 'public method acquire', 'public method release', 'public method holding', 'public method lastWait',
                 'public method waited', 'public method holderPid', '<required> SQLite3|PDO $db', '<required> callable $fn',
                 '<optional> float $waitSeconds = 25.0', '<optional> float $waitSeconds = 5.0',
                 "<optional> string \$setting = 'the waitSeconds argument of WriterLock\\\\Queue::begin()'",
                 "<optional> string \$setting = 'the waitSeconds argument of WriterLock\\\\Queue::exec()'" ) as $needle )
{
    if ( strpos( $text, $needle ) === false )
    {
        echo "php --re writerlock does not show: $needle\n";
    }
}

echo "-- phpinfo() and php --ri\n";
ob_start();
phpinfo( INFO_MODULES );
$info = ob_get_clean();
var_dump( preg_match( '/^writerlock => enabled$/m', $info ), strpos( $info, "Version => $version" ) !== false,
          strpos( $info, 'Lock files => <database>.writer-lock, <database>.writer-queue' ) !== false );
exec( implode( ' ', array_map( 'escapeshellarg', array_merge( array( PHP_BINARY ), $ini, array( '--ri', 'writerlock' ) ) ) ), $out2, $rc );
var_dump( $rc, strpos( implode( "\n", $out2 ), "Version => $version" ) !== false );

echo "-- the exception classes\n";
foreach ( array( 'WriterLock\\Exception', 'WriterLock\\BusyException', 'WriterLock\\StartException' ) as $class )
{
    echo $class, ' < ', implode( ' < ', class_parents( $class ) ), "\n";
}
var_dump( ( new ReflectionClass( 'WriterLock\\Queue' ) )->isFinal() );

echo "-- an exception thrown by the queue carries the caller's file and line\n";
$q = new WriterLock\Queue( ':memory:' );
$db = new SQLite3( ':memory:' );
$line = __LINE__ + 3;
try
{
    $q->commit( $db );
}
catch ( WriterLock\Exception $e )
{
    var_dump( $e->getFile() === __FILE__, $e->getLine() === $line, count( $e->getTrace() ) >= 0 );
    echo $e->getMessage(), "\n";
}

echo "-- a BusyException made in PHP works like any exception\n";
$e = new WriterLock\BusyException( 'mine', 7 );
var_dump( $e->getMessage(), $e->getCode(), $e->waited(), $e->limit(), $e->setting(), $e->holderPid() );
$sub = new class( 'x' ) extends WriterLock\BusyException {};
var_dump( $sub->holderPid() );

echo "-- an in-memory database needs no lock files\n";
$db->exec( 'CREATE TABLE t (x)' );
$q->begin( $db, 1 );
var_dump( $q->holding() );
$db->exec( 'INSERT INTO t VALUES (1)' );
var_dump( $q->commit( $db ), $db->querySingle( 'SELECT COUNT(*) FROM t' ), file_exists( ':memory:.writer-lock' ) );
?>
--EXPECT--
-- name and version
bool(true)
bool(true)
-- classes and functions
WriterLock\BusyException
WriterLock\Exception
WriterLock\Queue
WriterLock\StartException
array(0) {
}
-- php --re writerlock
int(0)
-- phpinfo() and php --ri
int(1)
bool(true)
bool(true)
int(0)
bool(true)
-- the exception classes
WriterLock\Exception < RuntimeException < Exception
WriterLock\BusyException < WriterLock\Exception < RuntimeException < Exception
WriterLock\StartException < WriterLock\Exception < RuntimeException < Exception
bool(true)
-- an exception thrown by the queue carries the caller's file and line
bool(true)
bool(true)
bool(true)
there is no queued transaction to end: this writer queue does not hold the writer turn; call begin() first
-- a BusyException made in PHP works like any exception
string(4) "mine"
int(7)
float(0)
float(0)
string(0) ""
NULL
NULL
-- an in-memory database needs no lock files
bool(true)
bool(true)
int(1)
bool(false)
