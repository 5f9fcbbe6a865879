<?php
// Bad input gives clear exceptions, never a crash, a PHP warning or a
// leaked turn: a path in a missing directory, a closed SQLite3 object,
// commit()/rollback() without a transaction, arguments of the wrong type,
// scripts that end in the middle of a transaction.
require __DIR__ . '/lib.php';

$dir = tmpdir();
$path = make_db( $dir );
$GLOBALS['diagnostics'] = array();
set_error_handler( function ( $no, $str, $file, $line ) {
    $GLOBALS['diagnostics'][] = "$str ($file:$line)";
    return true;
} );
function no_diagnostics()
{
    check( $GLOBALS['diagnostics'] === array(), 'PHP diagnostics were raised: ' . implode( '; ', $GLOBALS['diagnostics'] ) );
}
function turn_is_free( $path )
{
    $probe = probe_begin( $path, 2 );
    check( $probe['ok'], 'another process could not begin: ' . json_encode( $probe ) );
    check( $probe['waited'] < 0.5, 'another process waited ' . $probe['waited'] . ' s for a turn nobody should hold' );
}

t( 'a path in a missing directory: WriterLock\\Exception naming the lock file', function () use ( $dir ) {
    $missing = $dir . '/no/such/dir/site.db';
    $e = expect_throw( 'WriterLock\\Exception', function () use ( $missing ) { new WriterLock\Queue( $missing ); } );
    check_same( "could not open the writer lock file $missing.writer-lock: No such file or directory (os error 2); "
                . "check that the database's directory exists and that this user may read it", $e->getMessage(), 'message' );
    no_diagnostics();
} );

t( 'a relative path is taken from the current directory', function () use ( $dir ) {
    $cwd = getcwd();
    chdir( $dir );
    try
    {
        $db = new SQLite3( 'relative.db' );
        $q = new WriterLock\Queue( 'relative.db' );
        chdir( '/' );
        $q->begin( $db, 1 );
        $q->commit( $db );
        check( file_exists( "$dir/relative.db.writer-lock" ), 'no lock file next to the database' );
    }
    finally
    {
        chdir( $cwd );
    }
} );

t( 'a closed SQLite3 object: begin() throws StartException, exec() and commit() WriterLock\\Exception', function () use ( $path ) {
    $db = new SQLite3( $path );
    $db->close();
    $q = new WriterLock\Queue( $path );
    $closed = 'The SQLite3 object has not been correctly initialised or is already closed';
    $e = expect_throw( 'WriterLock\\StartException', function () use ( $q, $db ) { $q->begin( $db, 1 ); } );
    check_same( "the transaction could not start: $closed; nothing was written", $e->getMessage(), 'begin() message' );
    check_same( 21, $e->getCode(), 'code (SQLITE_MISUSE)' );
    $e = expect_throw( 'WriterLock\\Exception', function () use ( $q, $db ) { $q->exec( $db, "INSERT INTO pub (seq) VALUES (1)", 1 ); } );
    check_same( "the statement failed: $closed", $e->getMessage(), 'exec() message' );
    expect_throw( 'WriterLock\\Exception', function () use ( $q, $db ) { $q->commit( $db ); } );
    check( !$q->holding(), 'holding' );
    no_diagnostics();
    turn_is_free( $path );
} );

t( 'a connection closed inside a queued transaction: commit() throws, the turn is back', function () use ( $path ) {
    $db = new SQLite3( $path );
    $q = new WriterLock\Queue( $path );
    $q->begin( $db, 1 );
    $db->exec( "INSERT INTO pub (worker, seq) VALUES ('closed', 1)" );
    $db->close();
    $e = expect_throw( 'WriterLock\\Exception', function () use ( $q, $db ) { $q->commit( $db ); } );
    check( strpos( $e->getMessage(), 'COMMIT failed: The SQLite3 object has not been correctly initialised or is already closed' ) === 0, $e->getMessage() );
    check( !$q->holding(), 'still holding' );
    check_same( 0, count_rows( $path, "worker = 'closed'" ), 'rows written by a closed transaction' );
    no_diagnostics();
    turn_is_free( $path );
} );

t( 'commit() and rollback() without a transaction: clear exception, no leaked turn', function () use ( $path ) {
    $db = new SQLite3( $path );
    $q = new WriterLock\Queue( $path );
    $text = 'there is no queued transaction to end: this writer queue does not hold the writer turn; call begin() first';
    check_same( $text, expect_throw( 'WriterLock\\Exception', function () use ( $q, $db ) { $q->commit( $db ); } )->getMessage(), 'commit()' );
    check_same( $text, expect_throw( 'WriterLock\\Exception', function () use ( $q, $db ) { $q->rollback( $db ); } )->getMessage(), 'rollback()' );
    $q->begin( $db, 1 );
    $q->commit( $db );
    expect_throw( 'WriterLock\\Exception', function () use ( $q, $db ) { $q->commit( $db ); } );
    no_diagnostics();
    turn_is_free( $path );
} );

t( 'a connection already inside its own transaction: refused at once', function () use ( $path ) {
    $db = new SQLite3( $path );
    $db->exec( 'BEGIN' );
    $q = new WriterLock\Queue( $path );
    $holder = start_holder( $path );
    try
    {
        $start = microtime( true );
        $e = expect_throw( 'WriterLock\\Exception', function () use ( $q, $db ) { $q->begin( $db, 5 ); } );
        check( microtime( true ) - $start < 0.5, 'begin() waited before refusing' );
        check_same( "WriterLock\\Queue::begin(): the connection is already inside a transaction this queue did not begin "
                    . "(a BEGIN run directly, PDO::beginTransaction(), or another queue's); end it with COMMIT or ROLLBACK first. "
                    . 'Nothing was written by this call', $e->getMessage(), 'message' );
    }
    finally
    {
        release_holder( $holder );
    }
    $db->exec( 'ROLLBACK' );
    no_diagnostics();
} );

t( 'commit() with another connection than begin(): refused, transaction and turn stay', function () use ( $path ) {
    $db = new SQLite3( $path );
    $other = new SQLite3( $path );
    $q = new WriterLock\Queue( $path );
    $q->begin( $db, 1 );
    $db->exec( "INSERT INTO pub (worker, seq) VALUES ('right connection', 1)" );
    $e = expect_throw( 'WriterLock\\Exception', function () use ( $q, $other ) { $q->commit( $other ); } );
    check_same( 'WriterLock\\Queue::commit(): Argument #1 ($db) is not the connection the transaction began on; '
                . 'pass that one (the transaction and the writer turn stay open)', $e->getMessage(), 'message' );
    check( $q->holding(), 'the turn was given back' );
    check_same( true, $q->commit( $db ), 'commit() on the right connection' );
    check_same( 1, count_rows( $path, "worker = 'right connection'" ), 'rows' );
    no_diagnostics();
} );

t( 'arguments of the wrong type or value: TypeError and ValueError', function () use ( $path ) {
    $db = new SQLite3( $path );
    $q = new WriterLock\Queue( $path );
    check_same( 'WriterLock\\Queue::begin(): Argument #1 ($db) must be of type SQLite3|PDO, stdClass given',
                expect_throw( 'TypeError', function () use ( $q ) { $q->begin( new stdClass(), 1 ); } )->getMessage(), 'object' );
    check_same( 'WriterLock\\Queue::commit(): Argument #1 ($db) must be of type SQLite3|PDO, string given',
                expect_throw( 'TypeError', function () use ( $q ) { $q->commit( 'site.db' ); } )->getMessage(), 'string' );
    check_same( 'WriterLock\\Queue::begin(): Argument #2 ($waitSeconds) must be of type float, string given',
                expect_throw( 'TypeError', function () use ( $q, $db ) { $q->begin( $db, 'soon' ); } )->getMessage(), 'wait' );
    check_same( 'WriterLock\\Queue::begin(): Argument #2 ($waitSeconds) must be a number of seconds from 0 up, -1 given',
                expect_throw( 'ValueError', function () use ( $q, $db ) { $q->begin( $db, -1 ); } )->getMessage(), 'negative' );
    expect_throw( 'ValueError', function () use ( $q, $db ) { $q->begin( $db, NAN ); } );
    expect_throw( 'ValueError', function () use ( $q, $db ) { $q->exec( $db, 'SELECT 1', INF ); } );
    expect_throw( 'ArgumentCountError', function () use ( $q ) { $q->begin(); } );
    check( !$q->holding(), 'holding after refused arguments' );
    no_diagnostics();
    turn_is_free( $path );
} );

foreach ( array( 'exit', 'fatal', 'exception', 'kill' ) as $how )
{
    t( "a script that ends inside a queued transaction ($how) leaves no turn and no row", function () use ( $path, $how ) {
        $child = new Child( php_cmd( __DIR__ . '/helpers/abandon.php', array( $path, $how ) ) );
        check_same( 'began', $child->line(), 'child' );
        $child->wait();
        turn_is_free( $path );
        check_same( 0, count_rows( $path, "worker = 'abandoned'" ), 'rows of the abandoned transaction' );
    } );
}
