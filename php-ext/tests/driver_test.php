<?php
// eZSQLite3QueuedDB (php-ext/driver) on stand-ins of Exponential's database
// classes: transactions and single statements go through the queue with the
// [DatabaseSettings] waits; a timeout is logged with its exact text and
// fails the transaction or query the eZ way; without the extension the
// driver says so once and falls back to BEGIN IMMEDIATE.
require __DIR__ . '/lib.php';
require __DIR__ . '/standins/autoload.php';

$dir = tmpdir();
$site = "$dir/site";
mkdir( $site );
$path = make_db( $dir );
chdir( $site );

/** Sets site.ini's [DatabaseSettings] for this process's eZINI. */
function settings( array $values )
{
    global $dir;
    $file = tempnam( $dir, 'ini' );
    file_put_contents( $file, json_encode( $values ) );
    putenv( "WL_EZINI=$file" );
    eZINI::resetInstance();
    return $file;
}

function driver( $path, $mode = eZDB::ERROR_HANDLING_EXCEPTIONS )
{
    $ezdb = new eZSQLite3QueuedDB( array( 'database' => $path ) );
    $ezdb->setErrorHandling( $mode );
    check( $ezdb->isConnected(), 'the driver did not connect' );
    return $ezdb;
}

function error_log_text( $site )
{
    return (string)@file_get_contents( "$site/var/log/error.log" );
}

/** The waits the driver reads, through a subclass that can say whether it is on the command line. */
final class WaitsProbe extends eZSQLite3QueuedDB
{
    public $cli = true;
    protected function isCommandLine() { return $this->cli; }
    function waits()
    {
        return array( $this->queuedTransactionWait(), '[DatabaseSettings] ' . $this->queuedTransactionSetting(),
                      $this->queuedStatementWaitMs(), '[DatabaseSettings] ' . $this->queuedStatementSetting() );
    }
}

t( 'a transaction goes through the queue: held while open, committed, turn given back', function () use ( $path ) {
    settings( array() );
    $ezdb = driver( $path );
    check( $ezdb->writerQueue() instanceof WriterLock\Queue, 'no writer queue' );
    $ezdb->begin();
    check( $ezdb->writerQueue()->holding(), 'the queue does not hold the turn inside the transaction' );
    $ezdb->query( "INSERT INTO pub (worker, seq) VALUES ('driver', 1)" );
    $other = probe_begin( $path, 0.2 );
    check( !$other['ok'] && $other['holder'] === getmypid(), 'another process began inside our transaction: ' . json_encode( $other ) );
    $ezdb->begin();                                   // nested: counted, not started again
    $ezdb->commit();
    check( $ezdb->writerQueue()->holding(), 'the inner commit gave the turn back' );
    $ezdb->commit();
    check( !$ezdb->writerQueue()->holding(), 'holding after the commit' );
    check_same( 1, count_rows( $path, "worker = 'driver'" ), 'rows' );
    check( probe_begin( $path, 1 )['waited'] < 0.3, 'the turn was not free after the commit' );
    check_same( 30000, $ezdb->DBConnection->querySingle( 'PRAGMA busy_timeout' ), 'busy timeout of the connection (CLI)' );
} );

t( 'the waits: settings, defaults, CLI values on the command line, below 1 raised to 1', function () use ( $path ) {
    settings( array() );
    $probe = new WaitsProbe( array( 'database' => $path ) );
    check_same( array( 300.0, '[DatabaseSettings] SQLiteCLITransactionWait', 30000, '[DatabaseSettings] SQLiteCLIBusyTimeout' ), $probe->waits(), 'CLI defaults' );
    $probe->cli = false;
    check_same( array( 25.0, '[DatabaseSettings] SQLiteTransactionWait', 5000, '[DatabaseSettings] SQLiteBusyTimeout' ), $probe->waits(), 'web defaults' );
    settings( array( 'SQLiteTransactionWait' => '0', 'SQLiteCLITransactionWait' => '0.5', 'SQLiteBusyTimeout' => '250', 'SQLiteCLIBusyTimeout' => 'soon' ) );
    check_same( array( 1.0, '[DatabaseSettings] SQLiteTransactionWait', 250, '[DatabaseSettings] SQLiteBusyTimeout' ), $probe->waits(), 'web settings' );
    $probe->cli = true;
    check_same( array( 1.0, '[DatabaseSettings] SQLiteCLITransactionWait', 30000, '[DatabaseSettings] SQLiteCLIBusyTimeout' ), $probe->waits(), 'CLI settings' );
} );

t( 'a transaction that times out: exact text in error.log, eZDBException, nothing written, no turn held', function () use ( $path, $site ) {
    settings( array( 'SQLiteTransactionWait' => '9', 'SQLiteCLITransactionWait' => '0' ) );
    $ezdb = driver( $path );
    $holder = start_holder( $path );
    try
    {
        $start = microtime( true );
        $e = expect_throw( 'eZDBException', function () use ( $ezdb ) {
            $ezdb->begin();
            $ezdb->query( "INSERT INTO pub (worker, seq) VALUES ('timed out', 1)" );
            $ezdb->commit();
        } );
        $elapsed = microtime( true ) - $start;
    }
    finally
    {
        release_holder( $holder );
    }
    $text = 'database is busy: the transaction could not start within 1 s (waited 1.0 s, [DatabaseSettings] SQLiteCLITransactionWait), '
          . 'another write held the lock all that time; nothing was written';
    check( $elapsed >= 1.0 && $elapsed < 2.0, "the start gave up after $elapsed s" );
    check_same( $text, $e->getMessage(), 'eZDBException message' );
    check_same( 5, $e->getCode(), 'eZDBException code' );
    check_same( 0, $ezdb->transactionCounter(), 'transaction counter' );
    check_same( $text, $ezdb->errorMessage(), 'errorMessage()' );
    check( strpos( error_log_text( $site ), "] eZSQLite3QueuedDB::beginQuery:\n$text\n" ) !== false, "error.log:\n" . error_log_text( $site ) );
    check( !$ezdb->writerQueue()->holding(), 'holding after the failed start' );
    check_same( 0, count_rows( $path, "worker = 'timed out'" ), 'rows' );
    $ezdb->begin();
    check( $ezdb->writerQueue()->lastWait() < 0.2, 'the next start waited ' . $ezdb->writerQueue()->lastWait() . ' s' );
    $ezdb->rollback();
    check( !$ezdb->writerQueue()->holding(), 'holding after rollback()' );
} );

t( 'with eZ\'s standard error handling the timed-out start stops the script with the error page', function () use ( $path, $site ) {
    $ini = settings( array( 'SQLiteCLITransactionWait' => '1' ) );
    @unlink( "$site/var/log/error.log" );
    $holder = start_holder( $path );
    try
    {
        $child = new Child( php_cmd( __DIR__ . '/helpers/driver_script.php', array( $site, $path, $ini, 'standard' ) ) );
        $code = $child->wait();
    }
    finally
    {
        release_holder( $holder );
    }
    check_same( 1, $code, 'exit status' );
    check( strpos( $child->err, 'Fatal error: A database transaction in eZ Publish failed.' ) !== false, "stderr: {$child->err}" );
    check( strpos( error_log_text( $site ), 'database is busy: the transaction could not start within 1 s (waited 1.0 s, [DatabaseSettings] SQLiteCLITransactionWait)' ) !== false,
           "error.log:\n" . error_log_text( $site ) );
    check_same( 0, count_rows( $path, "worker = 'standard'" ), 'rows' );
    check( probe_begin( $path, 1 )['waited'] < 0.3, 'the turn leaked' );
} );

t( 'a single statement outside a transaction is queued; its timeout is logged and the query fails', function () use ( $path, $site ) {
    settings( array( 'SQLiteCLIBusyTimeout' => '400', 'SQLiteBusyTimeout' => '9000' ) );
    @unlink( "$site/var/log/error.log" );
    $ezdb = driver( $path );
    check_same( true, $ezdb->query( "INSERT INTO pub (worker, seq) VALUES ('single', 1)" ), 'a statement with the queue free' );
    check( $ezdb->writerQueue()->lastWait() > 0, 'the statement did not go through the queue' );
    $holder = start_holder( $path );
    try
    {
        $start = microtime( true );
        $result = $ezdb->query( "INSERT INTO pub (worker, seq) VALUES ('single', 2)" );
        $elapsed = microtime( true ) - $start;
    }
    finally
    {
        release_holder( $holder );
    }
    $text = 'database is busy: the statement waited 0.4 s for another write to end (limit 0.4 s, [DatabaseSettings] SQLiteCLIBusyTimeout) '
          . 'and was not run; nothing was written';
    check_same( false, $result, 'query() of the statement that timed out' );
    check( $elapsed >= 0.4 && $elapsed < 1.2, "the statement gave up after $elapsed s" );
    check_same( $text, $ezdb->errorMessage(), 'errorMessage()' );
    check_same( 5, $ezdb->errorNumber(), 'errorNumber()' );
    check( strpos( error_log_text( $site ), "] eZSQLite3QueuedDB::query:\n$text\n" ) !== false, "error.log:\n" . error_log_text( $site ) );
    check_same( 1, count_rows( $path, "worker = 'single'" ), 'rows' );
} );

t( 'a failing statement inside a transaction rolls it back and gives the turn back', function () use ( $path ) {
    settings( array() );
    $ezdb = driver( $path );
    $e = expect_throw( 'eZDBException', function () use ( $ezdb ) {
        $ezdb->begin();
        $ezdb->query( "INSERT INTO pub (worker, seq) VALUES ('half', 1)" );
        $ezdb->query( 'INSERT INTO no_such_table VALUES (1)' );
        $ezdb->commit();
    } );
    check( strpos( $e->getMessage(), 'no such table' ) !== false, $e->getMessage() );
    check( !$ezdb->writerQueue()->holding(), 'holding after the failed transaction' );
    check_same( 0, count_rows( $path, "worker = 'half'" ), 'rows of the failed transaction' );
    check( probe_begin( $path, 1 )['waited'] < 0.3, 'the turn leaked' );
} );

t( 'a COMMIT SQLite refuses is logged, rolled back, and frees the turn', function () use ( $dir, $site ) {
    settings( array() );
    @unlink( "$site/var/log/error.log" );
    $fk = "$dir/fk.db";
    $db = new SQLite3( $fk );
    $db->exec( 'CREATE TABLE p (id INTEGER PRIMARY KEY); CREATE TABLE c (pid INTEGER REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED)' );
    $db->close();
    $ezdb = driver( $fk );
    $ezdb->DBConnection->exec( 'PRAGMA foreign_keys = ON' );
    $ezdb->begin();
    $ezdb->query( 'INSERT INTO c VALUES (7)' );
    $ezdb->commit();
    check( strpos( error_log_text( $site ), "COMMIT failed: FOREIGN KEY constraint failed; the transaction was rolled back, nothing was written" ) !== false,
           "error.log:\n" . error_log_text( $site ) );
    check( !$ezdb->writerQueue()->holding(), 'holding after the refused COMMIT' );
    check_same( 0, $ezdb->DBConnection->querySingle( 'SELECT COUNT(*) FROM c' ), 'rows of the refused transaction' );
    check( $ezdb->DBConnection->exec( 'BEGIN' ) && $ezdb->DBConnection->exec( 'ROLLBACK' ), 'the transaction is still open' );
} );

t( 'close() inside a transaction gives the turn back', function () use ( $path ) {
    settings( array() );
    $ezdb = driver( $path );
    $ezdb->begin();
    $queue = $ezdb->writerQueue();
    $ezdb->close();
    check( !$queue->holding(), 'holding after close()' );
    check( probe_begin( $path, 1 )['waited'] < 0.3, 'the turn leaked' );
} );

t( 'with Transactions=disabled every write is a queued statement', function () use ( $path ) {
    settings( array( 'Transactions' => 'disabled' ) );
    $ezdb = driver( $path );
    $ezdb->begin();
    check( !$ezdb->writerQueue()->holding(), 'a transaction was started with Transactions=disabled' );
    check_same( true, $ezdb->query( "INSERT INTO pub (worker, seq) VALUES ('untransacted', 1)" ), 'query()' );
    check( $ezdb->writerQueue()->lastWait() > 0, 'the statement did not take a turn' );
    $ezdb->commit();
    check_same( 1, count_rows( $path, "worker = 'untransacted'" ), 'rows' );
} );

t( 'without the extension: said once in warning.log, BEGIN IMMEDIATE with the busy timeout', function () use ( $path, $site ) {
    $ini = settings( array( 'SQLiteCLITransactionWait' => '1' ) );
    @unlink( "$site/var/log/warning.log" );
    @unlink( "$site/var/log/error.log" );
    $child = new Child( php_cmd( __DIR__ . '/helpers/driver_script.php', array( $site, $path, $ini, 'publish', 3 ), false ) );
    check_same( 0, $child->wait(), "exit status ({$child->out} {$child->err})" );
    check_same( array( 'rows' => 3, 'queue' => false ), json_decode( $child->out, true ), 'result' );
    $warnings = (string)@file_get_contents( "$site/var/log/warning.log" );
    $said = 'The writerlock extension is not loaded (extension=writerlock.so): transactions start with BEGIN IMMEDIATE '
          . "under SQLite's busy timeout, without the write queue";
    check_same( 1, substr_count( $warnings, $said ), "warning.log:\n$warnings" );
    check_same( '', error_log_text( $site ), 'error.log' );
    // A writer holding SQLite's lock outside any queue: SQLite's busy handler waits, then the seed's text.
    $holder = start_holder( $path, 'sqlite' );
    try
    {
        $child = new Child( php_cmd( __DIR__ . '/helpers/driver_script.php', array( $site, $path, $ini, 'standard' ), false ) );
        $code = $child->wait();
    }
    finally
    {
        release_holder( $holder );
    }
    check_same( 1, $code, 'exit status of the start that timed out' );
    check( strpos( error_log_text( $site ), 'database is busy: the transaction could not start within 1 s (waited 1.0 s, [DatabaseSettings] SQLiteCLITransactionWait), '
                   . 'another write held the lock all that time; nothing was written' ) !== false, "error.log:\n" . error_log_text( $site ) );
} );
