<?php
// eZSQLite3QueuedDB (php-ext/driver/writerlock, the Exponential extension) on stand-ins of Exponential's database
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
    check_wait( $elapsed, 1.0, 'the start gave up after' );
    check_busy( $text, $e->getMessage(), 'eZDBException message' );
    check_same( 5, $e->getCode(), 'eZDBException code' );
    check_same( 0, $ezdb->transactionCounter(), 'transaction counter' );
    check_busy( $text, $ezdb->errorMessage(), 'errorMessage()' );
    check_busy_in( "] eZSQLite3QueuedDB::beginQuery:\n$text\n", error_log_text( $site ), 'error.log' );
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
    $text = 'database is busy: the transaction could not start within 1 s (waited 1.0 s, [DatabaseSettings] SQLiteCLITransactionWait), '
          . 'another write held the lock all that time; nothing was written';
    check_busy_in( $text, error_log_text( $site ), 'error.log' );
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
    check_wait( $elapsed, 0.4, 'the statement gave up after' );
    check_busy( $text, $ezdb->errorMessage(), 'errorMessage()' );
    check_same( 5, $ezdb->errorNumber(), 'errorNumber()' );
    check_busy_in( "] eZSQLite3QueuedDB::query:\n$text\n", error_log_text( $site ), 'error.log' );
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

t( 'a COMMIT SQLite refuses fails the transaction the eZ way: logged, rolled back, turn freed, eZDBException', function () use ( $dir, $site ) {
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
    $e = expect_throw( 'eZDBException', function () use ( $ezdb ) { $ezdb->commit(); } );
    check_same( 'FOREIGN KEY constraint failed', $e->getMessage(), 'eZDBException message (SQLite\'s text)' );
    check_same( 19, $e->getCode(), 'eZDBException code (SQLITE_CONSTRAINT)' );
    $log = error_log_text( $site );
    check( strpos( $log, "COMMIT failed: FOREIGN KEY constraint failed; the transaction was rolled back, nothing was written" ) !== false, "error.log:\n$log" );
    check( strpos( $log, 'Transaction in progress failed due to DB error, transaction was rollbacked' ) !== false, "error.log:\n$log" );
    check_same( 0, $ezdb->transactionCounter(), 'transaction counter' );
    check( !$ezdb->writerQueue()->holding(), 'holding after the refused COMMIT' );
    check_same( 0, $ezdb->DBConnection->querySingle( 'SELECT COUNT(*) FROM c' ), 'rows of the refused transaction' );
    check( $ezdb->DBConnection->exec( 'BEGIN' ) && $ezdb->DBConnection->exec( 'ROLLBACK' ), 'the transaction is still open' );
} );

t( 'connecting while another connection writes: PRAGMA journal_mode = wal waits within the busy timeout, nothing logged', function () use ( $dir, $site ) {
    settings( array() );
    @unlink( "$site/var/log/error.log" );
    $fresh = "$dir/fresh.db";
    $db = new SQLite3( $fresh );                      // rollback journal: switching to WAL needs every other lock gone
    $db->exec( 'CREATE TABLE pub (id INTEGER PRIMARY KEY, worker TEXT, seq INTEGER, seen INTEGER)' );
    $db->close();
    $holder = new Child( php_cmd( __DIR__ . '/helpers/holder.php', array( $fresh, 'sqlite', 0.5 ) ) );
    check( strpos( $holder->line(), 'held ' ) === 0, 'the holder did not hold' );
    $ezdb = driver( $fresh );
    check_same( 0, $holder->wait(), 'holder exit status' );
    check_same( 0, (int)$ezdb->errorNumber(), 'errorNumber() of the fresh connection' );
    check_same( '', error_log_text( $site ), 'error.log' );
    check_same( 'wal', $ezdb->DBConnection->querySingle( 'PRAGMA journal_mode' ), 'journal mode' );
} );

t( 'a forked child that closes the transaction it inherited logs nothing; the parent keeps its turn', function () use ( $path, $site ) {
    settings( array() );
    @unlink( "$site/var/log/error.log" );
    $ezdb = driver( $path );
    $ezdb->begin();
    $ezdb->query( "INSERT INTO pub (worker, seq) VALUES ('forking parent', 1)" );
    $pid = pcntl_fork();
    check( $pid >= 0, 'pcntl_fork() failed' );
    if ( $pid === 0 )
    {
        $ezdb->close();                               // as the asynchronous publisher's children do
        posix_kill( getmypid(), SIGKILL );            // no shutdown functions of the test in the child
    }
    pcntl_waitpid( $pid, $status );
    check_same( '', error_log_text( $site ), 'error.log after the child closed its copy' );
    $pid = pcntl_fork();
    check( $pid >= 0, 'pcntl_fork() failed' );
    if ( $pid === 0 )
    {
        // A child asked to commit: nothing of it is the child's; false, nothing logged.
        $answer = $ezdb->commit();
        file_put_contents( "$site/child-commit.txt", var_export( $answer, true ) . ' ' . $ezdb->transactionCounter() );
        posix_kill( getmypid(), SIGKILL );
    }
    pcntl_waitpid( $pid, $status );
    check_same( 'false 0', @file_get_contents( "$site/child-commit.txt" ), "the child's commit() and transaction counter" );
    check_same( '', error_log_text( $site ), 'error.log after the child committed its copy' );
    check( $ezdb->writerQueue()->holding(), 'the parent lost its turn' );
    $ezdb->commit();
    check( !$ezdb->writerQueue()->holding(), 'holding after the commit' );
    check_same( 1, count_rows( $path, "worker = 'forking parent'" ), 'rows' );
} );

t( 'the lock file is fixed at connect time: a chdir() before the first write changes nothing', function () use ( $dir, $site ) {
    settings( array() );
    mkdir( "$site/var/storage/sqlite3", 0777, true );
    $path = make_db( "$site/var/storage/sqlite3", 'relative.db' );
    $ezdb = driver( 'relative.db' );                 // eZ's name, resolved under var/storage/sqlite3 of the site
    @mkdir( "$dir/var/storage/sqlite3", 0777, true );  // the same relative path exists from the new directory too
    chdir( $dir );
    try
    {
        $ezdb->begin();
        $other = probe_begin( $path, 0.2 );
        $ezdb->rollback();
    }
    finally
    {
        chdir( $site );
    }
    check( !$other['ok'] && $other['holder'] === getmypid(), 'another process was not queued behind the transaction: ' . json_encode( $other ) );
    check( !file_exists( "$dir/var/storage/sqlite3/relative.db.writer-lock" ), 'a lock file was made under the new working directory' );
} );

t( 'a failed single write keeps SQLite\'s own text in errorMessage()', function () use ( $path, $site ) {
    settings( array() );
    $ezdb = driver( $path );
    check_same( true, $ezdb->query( "INSERT INTO pub (id, worker) VALUES (4242, 'unique')" ), 'the first insert' );
    check_same( false, $ezdb->query( "INSERT INTO pub (id, worker) VALUES (4242, 'unique')" ), 'the second insert' );
    check_same( 'UNIQUE constraint failed: pub.id', $ezdb->errorMessage(), 'errorMessage()' );
    check_same( 19, $ezdb->errorNumber(), 'errorNumber()' );
    check( strpos( error_log_text( $site ), "(UNIQUE constraint failed: pub.id)" ) !== false, "error.log:\n" . error_log_text( $site ) );
} );

t( 'a transaction wait not below max_execution_time is logged once per process, naming the setting to lower', function () use ( $path, $site ) {
    $ini = settings( array( 'SQLiteCLITransactionWait' => '30' ) );
    @unlink( "$site/var/log/error.log" );
    $path = make_db( dirname( $site ), 'limit.db' );
    $cmd = array( PHP_BINARY, '-d', 'extension=' . ext_path(), '-d', 'max_execution_time=20',
                  __DIR__ . '/helpers/driver_script.php', $site, $path, $ini, 'publish', 3 );
    $child = new Child( $cmd );
    check_same( 0, $child->wait(), "exit status ({$child->out} {$child->err})" );
    $said = "[DatabaseSettings] SQLiteCLITransactionWait is 30 s, not below PHP's max_execution_time of 20 s: a transaction that waits "
          . 'for its turn is cut off at max_execution_time. Lower SQLiteCLITransactionWait to a few seconds below max_execution_time '
          . "(and below the web server's request timeout), or raise max_execution_time";
    check_same( 1, substr_count( error_log_text( $site ), $said ), "error.log:\n" . error_log_text( $site ) );
    @unlink( "$site/var/log/error.log" );
    $cmd[4] = 'max_execution_time=40';
    $child = new Child( $cmd );
    check_same( 0, $child->wait(), "exit status ({$child->out} {$child->err})" );
    check_same( '', error_log_text( $site ), 'error.log with the wait below max_execution_time' );
} );

t( 'the extension folder dropped into extension/ and activated: autoload finds the class, its settings set the alias', function () use ( $path, $site ) {
    $folder = dirname( __DIR__ ) . '/driver/writerlock';
    @mkdir( "$site/extension" );
    exec( 'cp -r ' . escapeshellarg( $folder ) . ' ' . escapeshellarg( "$site/extension/" ), $out, $rc );
    check_same( 0, $rc, 'cp -r of the extension folder' );
    check( preg_match( '/<extension name="writerlock">.*<\/extension>\s*$/s', file_get_contents( "$folder/extension.xml" ) ) === 1, 'extension.xml does not describe the extension writerlock' );
    $child = new Child( php_cmd( __DIR__ . '/helpers/ez_activate.php', array( $site, $path ) ) );
    check_same( 0, $child->wait(), "exit status ({$child->out} {$child->err})" );
    check_same( array( 'alias' => 'eZSQLite3QueuedDB', 'class' => 'eZSQLite3QueuedDB', 'file' => 'extension/writerlock/classes/ezsqlite3queueddb.php',
                       'queue' => true, 'rows' => 1 ), json_decode( $child->out, true ), 'the activated site' );
    exec( 'rm -rf ' . escapeshellarg( "$site/extension" ) );
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

t( 'without the extension: said once in error.log (a default install logs errors only), BEGIN IMMEDIATE with the busy timeout', function () use ( $path, $site ) {
    $ini = settings( array( 'SQLiteCLITransactionWait' => '1' ) );
    @unlink( "$site/var/log/warning.log" );
    @unlink( "$site/var/log/error.log" );
    $child = new Child( php_cmd( __DIR__ . '/helpers/driver_script.php', array( $site, $path, $ini, 'publish', 3 ), false ) );
    check_same( 0, $child->wait(), "exit status ({$child->out} {$child->err})" );
    check_same( array( 'rows' => 3, 'queue' => false ), json_decode( $child->out, true ), 'result' );
    $said = 'The writerlock extension is not loaded (extension=writerlock.so): transactions start with BEGIN IMMEDIATE '
          . "under SQLite's busy timeout, without the write queue";
    check_same( 1, substr_count( error_log_text( $site ), $said ), "error.log:\n" . error_log_text( $site ) );
    check_same( "[ %s ] [%d] eZSQLite3QueuedDB::writerQueue:\n$said\n", preg_replace( array( '/^\[ [^]]+ \]/', '/\] \[\d+\]/' ), array( '[ %s ]', '] [%d]' ), error_log_text( $site ) ),
                'error.log: the notice is all there is' );
    check( !file_exists( "$site/var/log/warning.log" ), 'warning.log: ' . @file_get_contents( "$site/var/log/warning.log" ) );
    @unlink( "$site/var/log/error.log" );
    // A writer holding SQLite's lock outside any queue: SQLite's busy handler waits, then the driver's exact text.
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
    $text = 'database is busy: the transaction could not start within 1 s (waited 1.0 s, [DatabaseSettings] SQLiteCLITransactionWait), '
          . 'another write held the lock all that time; nothing was written';
    check_busy_in( $text, error_log_text( $site ), 'error.log' );
} );
