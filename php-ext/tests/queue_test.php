<?php
// WriterLock\Queue's behaviour on one database: begin/commit/rollback,
// exec, holding, lastWait, a COMMIT SQLite refuses, and failures that
// surface only as this extension's exceptions (no PHP warning anywhere).
require __DIR__ . '/lib.php';

$dir = tmpdir();
$path = make_db( $dir );

// Every PHP diagnostic, whatever error_reporting says, is a failure here.
$GLOBALS['diagnostics'] = array();
set_error_handler( function ( $no, $str, $file, $line ) {
    $GLOBALS['diagnostics'][] = "$str ($file:$line)";
    return true;
} );
function no_diagnostics()
{
    check( $GLOBALS['diagnostics'] === array(), 'PHP diagnostics were raised: ' . implode( '; ', $GLOBALS['diagnostics'] ) );
    check( error_get_last() === null, 'error_get_last(): ' . json_encode( error_get_last() ) );
}

t( 'begin, write, commit: committed, turn given back', function () use ( $path ) {
    $db = new SQLite3( $path );
    $q = new WriterLock\Queue( $path );
    check( !$q->holding(), 'holding before begin' );
    $q->begin( $db, 5 );
    check( $q->holding(), 'not holding after begin' );
    check( is_float( $q->lastWait() ) && $q->lastWait() >= 0 && $q->lastWait() < 1, 'lastWait(): ' . $q->lastWait() );
    check( file_exists( $path . '.writer-lock' ) && file_exists( $path . '.writer-queue' ), 'lock files missing' );
    $db->exec( "INSERT INTO pub (worker, seq) VALUES ('basic', 1)" );
    check_same( true, $q->commit( $db ), 'commit()' );
    check( !$q->holding(), 'holding after commit' );
    check_same( 1, count_rows( $path, "worker = 'basic'" ), 'rows' );
    check( probe_begin( $path, 1 )['waited'] < 0.5, 'another process waited for a turn given back' );
    no_diagnostics();
} );

t( 'begin sets the busy timeout to the time left', function () use ( $path ) {
    $db = new SQLite3( $path );
    $q = new WriterLock\Queue( $path );
    $q->begin( $db, 7.5 );
    $ms = $db->querySingle( 'PRAGMA busy_timeout' );
    $q->rollback( $db );
    check( $ms > 7000 && $ms <= 7500, "busy_timeout after begin(7.5): $ms" );
} );

t( 'rollback discards the transaction and gives the turn back', function () use ( $path ) {
    $db = new SQLite3( $path );
    $q = new WriterLock\Queue( $path );
    $q->begin( $db, 5 );
    $db->exec( "INSERT INTO pub (worker, seq) VALUES ('rolled', 1)" );
    check_same( true, $q->rollback( $db ), 'rollback()' );
    check( !$q->holding(), 'holding after rollback' );
    check_same( 0, count_rows( $path, "worker = 'rolled'" ), 'rows after rollback' );
    no_diagnostics();
} );

t( 'commit() returns false when SQLite refuses: transaction and turn stay', function () use ( $dir ) {
    $path = $dir . '/fk.db';
    $db = new SQLite3( $path );
    $db->exec( 'PRAGMA journal_mode = wal; PRAGMA foreign_keys = ON' );
    $db->exec( 'CREATE TABLE p (id INTEGER PRIMARY KEY); CREATE TABLE c (pid INTEGER REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED)' );
    $q = new WriterLock\Queue( $path );
    $q->begin( $db, 5 );
    $db->exec( 'INSERT INTO c VALUES (42)' );      // violates the deferred key at COMMIT
    check_same( false, $q->commit( $db ), 'commit() of a transaction SQLite refuses' );
    check( $q->holding(), 'the turn was given back after a refused COMMIT' );
    check_lock( $path, 'held', 'after the refused COMMIT' );
    check( stripos( $db->lastErrorMsg(), 'FOREIGN KEY' ) !== false, 'lastErrorMsg(): ' . $db->lastErrorMsg() );
    $other = probe_begin( $path, 0.2 );
    check( !$other['ok'] && $other['class'] === 'WriterLock\\BusyException', 'another process got the turn: ' . json_encode( $other ) );
    check_same( getmypid(), $other['holder'], 'holder pid seen by the other process' );
    $db->exec( 'INSERT INTO p VALUES (42)' );      // the transaction is still open: fix it
    check_same( true, $q->commit( $db ), 'commit() after the fix' );
    check( !$q->holding(), 'holding after the commit' );
    check_lock( $path, 'free', 'after the COMMIT that succeeded' );
    check_same( 1, $db->querySingle( 'SELECT COUNT(*) FROM c' ), 'rows of c' );
    no_diagnostics();
} );

t( 'after a COMMIT SQLite refuses, the writer lock stays held until rollback()', function () use ( $dir ) {
    $path = $dir . '/fk-rollback.db';
    $db = new SQLite3( $path );
    $db->exec( 'PRAGMA journal_mode = wal; PRAGMA foreign_keys = ON' );
    $db->exec( 'CREATE TABLE p (id INTEGER PRIMARY KEY); CREATE TABLE c (pid INTEGER REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED)' );
    $q = new WriterLock\Queue( $path );
    $q->begin( $db, 5 );
    $db->exec( 'INSERT INTO c VALUES (7)' );       // violates the deferred key at COMMIT
    check_same( false, $q->commit( $db ), 'commit() of a transaction SQLite refuses' );
    check_lock( $path, 'held', 'after the refused COMMIT' );
    check_same( false, $q->commit( $db ), 'commit() refused a second time' );
    check_lock( $path, 'held', 'after the second refused COMMIT' );
    check_same( true, $q->rollback( $db ), 'rollback()' );
    check( !$q->holding(), 'holding after rollback()' );
    check_lock( $path, 'free', 'after rollback()' );
    check_same( 0, $db->querySingle( 'SELECT COUNT(*) FROM c' ), 'rows of c after rollback()' );
    no_diagnostics();
} );

t( 'exec: a write outside a transaction is queued and committed', function () use ( $path ) {
    $db = new SQLite3( $path );
    $q = new WriterLock\Queue( $path );
    $q->exec( $db, "INSERT INTO pub (worker, seq) VALUES ('exec', 1)", 2 );
    check( !$q->holding(), 'holding after exec' );
    check_same( 1, count_rows( $path, "worker = 'exec'" ), 'rows' );
    check( $q->lastWait() > 0 && $q->lastWait() < 1, 'lastWait() after a queued exec: ' . $q->lastWait() );
} );

t( 'exec: reads run at once while another process holds the turn', function () use ( $path ) {
    $holder = start_holder( $path );
    try
    {
        $db = new SQLite3( $path );
        $q = new WriterLock\Queue( $path );
        $start = microtime( true );
        $q->exec( $db, 'SELECT COUNT(*) FROM pub', 0.5 );
        check( microtime( true ) - $start < 0.2, 'a read waited' );
        check_same( 0.0, $q->lastWait(), 'lastWait() of a read' );
    }
    finally
    {
        release_holder( $holder );
    }
} );

t( 'exec inside the queue\'s own transaction runs at once', function () use ( $path ) {
    $db = new SQLite3( $path );
    $q = new WriterLock\Queue( $path );
    $q->begin( $db, 5 );
    $q->exec( $db, "INSERT INTO pub (worker, seq) VALUES ('inside', 1)", 0.1 );
    check( $q->holding(), 'the turn ended inside the transaction' );
    $q->rollback( $db );
    check_same( 0, count_rows( $path, "worker = 'inside'" ), 'the statement was not part of the transaction' );
} );

t( 'failing statements raise WriterLock\\Exception with SQLite\'s message, no PHP warning', function () use ( $path ) {
    $GLOBALS['diagnostics'] = array();
    $db = new SQLite3( $path );
    $q = new WriterLock\Queue( $path );
    $e = expect_throw( 'WriterLock\\Exception', function () use ( $q, $db ) {
        $q->exec( $db, 'INSERT INTO no_such_table VALUES (1)', 1 );
    } );
    check_same( 'the statement failed: no such table: no_such_table', $e->getMessage(), 'message' );
    check_same( 1, $e->getCode(), 'code (SQLITE_ERROR)' );
    check( !$q->holding(), 'holding after a failed exec' );
    no_diagnostics();
    check( probe_begin( $path, 1 )['waited'] < 0.5, 'the turn leaked' );
} );

t( 'warnings stay silent with error_reporting(E_ALL) and no handler too', function () use ( $path ) {
    restore_error_handler();
    $db = new SQLite3( $path );
    $q = new WriterLock\Queue( $path );
    ob_start();
    expect_throw( 'WriterLock\\Exception', function () use ( $q, $db ) { $q->exec( $db, 'DELETE FROM nowhere', 1 ); } );
    $printed = ob_get_clean();
    check_same( '', $printed, 'output' );
    check_same( null, error_get_last(), 'error_get_last()' );
    set_error_handler( function ( $no, $str, $file, $line ) {
        $GLOBALS['diagnostics'][] = "$str ($file:$line)";
        return true;
    } );
} );

t( 'a connection with SQLite3 exceptions enabled works the same and keeps its mode', function () use ( $path ) {
    $db = new SQLite3( $path );
    $db->enableExceptions( true );
    $q = new WriterLock\Queue( $path );
    $e = expect_throw( 'WriterLock\\Exception', function () use ( $q, $db ) { $q->exec( $db, 'UPDATE nowhere SET x = 1', 1 ); } );
    check( strpos( $e->getMessage(), 'no such table: nowhere' ) !== false, $e->getMessage() );
    $q->begin( $db, 2 );
    $db->exec( "INSERT INTO pub (worker, seq) VALUES ('exceptions', 1)" );
    check_same( true, $q->commit( $db ), 'commit()' );
    check_same( true, $db->enableExceptions( true ), 'the connection\'s exception mode' );
    check_same( 1, count_rows( $path, "worker = 'exceptions'" ), 'rows' );
    no_diagnostics();
} );

t( 'a subclass of SQLite3 overriding exec() does not see the queue\'s own statements', function () use ( $path ) {
    $db = new class( $path ) extends SQLite3 {
        public $seen = array();
        public function exec( string $query ): bool
        {
            $this->seen[] = $query;
            return parent::exec( $query );
        }
    };
    $q = new WriterLock\Queue( $path );
    $q->begin( $db, 2 );
    $q->commit( $db );
    check_same( array(), $db->seen, 'statements seen by the subclass' );
    check( !$q->holding(), 'holding after commit()' );
} );

t( 'one process: a second begin fails at once instead of waiting for itself', function () use ( $path ) {
    $db = new SQLite3( $path );
    $db2 = new SQLite3( $path );
    $q = new WriterLock\Queue( $path );
    $q2 = new WriterLock\Queue( $path );
    $q->begin( $db, 5 );
    $start = microtime( true );
    $e = expect_throw( 'WriterLock\\Exception', function () use ( $q2, $db2 ) { $q2->begin( $db2, 5 ); } );
    check( microtime( true ) - $start < 0.5, 'the second begin waited' );
    check( strpos( $e->getMessage(), 'already holds the writer turn' ) !== false, $e->getMessage() );
    check( !$q2->holding(), 'the second queue object says it holds' );
    check( $q->holding(), 'the first lost its turn' );
    expect_throw( 'WriterLock\\Exception', function () use ( $q2, $db2 ) { $q2->commit( $db2 ); } );
    check( $q->holding(), 'the second object\'s commit() ended the first one\'s turn' );
    $q->commit( $db );
} );

t( 'a transaction the script ended itself: the next begin() works and ends that turn', function () use ( $path ) {
    $db = new SQLite3( $path );
    $db->busyTimeout( 6000 );
    $q = new WriterLock\Queue( $path );
    foreach ( array( 'COMMIT', 'ROLLBACK' ) as $end )
    {
        $q->begin( $db, 5 );
        $db->exec( "INSERT INTO pub (worker, seq) VALUES ('own-$end', 1)" );
        check_same( true, $db->exec( $end ), "the script's own $end" );
        $q->begin( $db, 5 );
        check( $q->holding(), "not holding after the begin that followed the script's $end" );
        $db->exec( "INSERT INTO pub (worker, seq) VALUES ('own-$end', 2)" );
        check_same( true, $q->commit( $db ), 'commit()' );
        check( !$q->holding(), 'holding after commit' );
        check_same( 6000, $db->querySingle( 'PRAGMA busy_timeout' ), 'the busy timeout after the turn' );
    }
    check_same( 2, count_rows( $path, "worker = 'own-COMMIT'" ), 'rows after the script\'s COMMIT' );
    check_same( 1, count_rows( $path, "worker = 'own-ROLLBACK'" ), 'rows after the script\'s ROLLBACK' );
    no_diagnostics();
} );

t( 'a queue object freed while holding gives the turn back', function () use ( $path ) {
    $db = new SQLite3( $path );
    $q = new WriterLock\Queue( $path );
    $q->begin( $db, 5 );
    unset( $q );
    $db->exec( 'ROLLBACK' );
    $probe = probe_begin( $path, 1 );
    check( $probe['ok'] && $probe['waited'] < 0.5, 'the turn outlived its queue object: ' . json_encode( $probe ) );
} );

t( 'lastWait() reports the wait for a turn another process held', function () use ( $path ) {
    $holder = new Child( php_cmd( __DIR__ . '/helpers/holder.php', array( $path, 'queue', 0.5 ) ) );
    check( strpos( $holder->line(), 'held ' ) === 0, 'holder' );
    $db = new SQLite3( $path );
    $q = new WriterLock\Queue( $path );
    $start = microtime( true );
    $q->begin( $db, 5 );
    $elapsed = microtime( true ) - $start;
    $q->rollback( $db );
    $holder->wait();
    check( $q->lastWait() > 0.3 && $q->lastWait() <= $elapsed, 'lastWait(): ' . $q->lastWait() . ", begin took $elapsed s" );
} );
