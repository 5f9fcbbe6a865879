<?php
// The module's public face: its name and version, the classes it
// registers, `php --re writerlock`, the phpinfo section, and the exception
// classes' hierarchy and behaviour as plain PHP exceptions.
require __DIR__ . '/lib.php';

function cargo_version()
{
    $toml = file_get_contents( getenv( 'WL_ROOT' ) . '/Cargo.toml' );
    check( preg_match( '/\[workspace\.package\][^\[]*?version\s*=\s*"([^"]+)"/s', $toml, $m ) === 1, 'no workspace version in Cargo.toml' );
    return $m[1];
}

t( 'the module is called writerlock and reports the crate version', function () {
    check( extension_loaded( 'writerlock' ), 'extension_loaded("writerlock") is false' );
    check_same( cargo_version(), phpversion( 'writerlock' ), 'phpversion("writerlock")' );
} );

t( 'the module registers exactly the four WriterLock classes', function () {
    $classes = ( new ReflectionExtension( 'writerlock' ) )->getClassNames();
    sort( $classes );
    check_same( array( 'WriterLock\\BusyException', 'WriterLock\\Exception', 'WriterLock\\Queue', 'WriterLock\\StartException' ),
                $classes, 'classes' );
    check_same( array(), ( new ReflectionExtension( 'writerlock' ) )->getFunctions(), 'functions' );
} );

t( 'php --re writerlock lists the API', function () {
    exec( implode( ' ', array_map( 'escapeshellarg', array( PHP_BINARY, '-d', 'extension=' . ext_path(), '--re', 'writerlock' ) ) ), $out, $rc );
    $text = implode( "\n", $out );
    check_same( 0, $rc, 'exit status of php --re' );
    foreach ( array( 'final class WriterLock\\Queue', 'class WriterLock\\BusyException extends WriterLock\\Exception',
                     'class WriterLock\\Exception extends RuntimeException', 'class WriterLock\\StartException extends WriterLock\\Exception',
                     'public method begin', 'public method commit', 'public method rollback', 'public method exec',
                     'public method holding', 'public method lastWait', 'public method waited', 'public method holderPid',
                     "<optional> string \$setting = '[DatabaseSettings] SQLiteTransactionWait'",
                     "<optional> string \$setting = '[DatabaseSettings] SQLiteBusyTimeout'", '<required> SQLite3|PDO $db', "<optional> float \$waitSeconds = 25.0" ) as $needle )
    {
        check( strpos( $text, $needle ) !== false, "php --re writerlock does not show: $needle" );
    }
} );

t( 'phpinfo has a writerlock section with the version', function () {
    ob_start();
    phpinfo( INFO_MODULES );
    $text = ob_get_clean();
    check( preg_match( '/^writerlock => enabled$/m', $text ) === 1, 'no "writerlock => enabled" line in phpinfo()' );
    check( preg_match( '/^Version => ' . preg_quote( cargo_version(), '/' ) . '$/m', $text ) === 1, 'no version line in phpinfo()' );
    check( strpos( $text, 'Lock files => <database>.writer-lock, <database>.writer-queue' ) !== false, 'no lock files line' );
    exec( escapeshellarg( PHP_BINARY ) . ' -d extension=' . escapeshellarg( ext_path() ) . ' --ri writerlock', $out, $rc );
    check( $rc === 0 && strpos( implode( "\n", $out ), 'Version => ' . cargo_version() ) !== false, 'php --ri writerlock shows no version' );
} );

t( 'the exceptions are RuntimeExceptions, Queue is final', function () {
    check( is_subclass_of( 'WriterLock\\Exception', 'RuntimeException' ), 'Exception does not extend RuntimeException' );
    check( is_subclass_of( 'WriterLock\\BusyException', 'RuntimeException' ), 'BusyException is no RuntimeException' );
    check( is_subclass_of( 'WriterLock\\StartException', 'RuntimeException' ), 'StartException is no RuntimeException' );
    check_same( 'WriterLock\\Exception', get_parent_class( 'WriterLock\\BusyException' ), 'BusyException parent' );
    check_same( 'WriterLock\\Exception', get_parent_class( 'WriterLock\\StartException' ), 'StartException parent' );
    check( ( new ReflectionClass( 'WriterLock\\Queue' ) )->isFinal(), 'Queue is not final' );
} );

t( 'exceptions thrown by the queue carry the caller\'s file and line', function () {
    $q = new WriterLock\Queue( ':memory:' );
    $db = new SQLite3( ':memory:' );
    $line = __LINE__ + 1;
    $e = expect_throw( 'WriterLock\\Exception', function () use ( $q, $db ) { $q->commit( $db ); } );
    check_same( __FILE__, $e->getFile(), 'file' );
    check_same( $line, $e->getLine(), 'line' );
    check( count( $e->getTrace() ) > 0, 'no trace' );
} );

t( 'a BusyException made in PHP works like any exception', function () {
    $e = new WriterLock\BusyException( 'mine', 7 );
    check_same( 'mine', $e->getMessage(), 'message' );
    check_same( 7, $e->getCode(), 'code' );
    check_same( 0.0, $e->waited(), 'waited() of an exception made in PHP' );
    check_same( 0.0, $e->limit(), 'limit()' );
    check_same( '', $e->setting(), 'setting()' );
    check_same( null, $e->holderPid(), 'holderPid()' );
    $sub = new class( 'x' ) extends WriterLock\BusyException {};
    check_same( null, $sub->holderPid(), 'holderPid() of a subclass' );
} );

t( 'an in-memory database needs no lock files', function () {
    $db = new SQLite3( ':memory:' );
    $db->exec( 'CREATE TABLE t (x)' );
    $q = new WriterLock\Queue( ':memory:' );
    $q->begin( $db, 1 );
    check( $q->holding(), 'not holding after begin' );
    $db->exec( 'INSERT INTO t VALUES (1)' );
    check_same( true, $q->commit( $db ), 'commit()' );
    check_same( 1, $db->querySingle( 'SELECT COUNT(*) FROM t' ), 'rows' );
    check( !file_exists( ':memory:.writer-lock' ), 'a lock file for :memory: was created' );
} );
