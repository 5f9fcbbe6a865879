<?php
/**
 * eZSQLite3QueuedDB: Exponential's SQLite3 driver with the writerlock write
 * queue (extension=writerlock.so).
 *
 * Writers of one SQLite database take turns across processes (PHP-FPM
 * workers, cronjobs, console scripts, forked children) before BEGIN
 * IMMEDIATE instead of failing with "database is locked": a transaction
 * waits up to [DatabaseSettings] SQLiteTransactionWait seconds (default 25,
 * values below 1 raised to 1; SQLiteCLITransactionWait, default 300, on the
 * command line), a single write statement outside a transaction up to
 * SQLiteBusyTimeout milliseconds (default 5000; SQLiteCLIBusyTimeout, default
 * 30000, on the command line). A wait that runs out is logged with its exact
 * message through eZDebug::writeError() (var/log/error.log) and fails the
 * transaction or the query the way eZ drivers do (reportError()), and so
 * does a COMMIT that SQLite refuses. Without the extension loaded the driver
 * says so once (var/log/error.log) and starts transactions with BEGIN
 * IMMEDIATE under SQLite's busy timeout.
 *
 * Shipped as the Exponential extension "writerlock" (this file is
 * extension/writerlock/classes/ezsqlite3queueddb.php; its
 * settings/site.ini.append.php sets ImplementationAlias[sqlite3]): activate
 * it with ActiveExtensions[]=writerlock, regenerate the autoloads
 * (php bin/php/ezpgenerateautoloads.php --extension), and keep
 * DatabaseImplementation=sqlite3.
 */
class eZSQLite3QueuedDB extends eZSQLite3DB
{
    /** The settings group the waits are read from. */
    const SETTINGS_GROUP = 'DatabaseSettings';

    /** Defaults of the four waits (seconds for transactions, milliseconds for statements). */
    const TRANSACTION_WAIT = 25;
    const CLI_TRANSACTION_WAIT = 300;
    const BUSY_TIMEOUT = 5000;
    const CLI_BUSY_TIMEOUT = 30000;

    /** SQLite's result codes for a lock held by another connection. */
    const SQLITE_BUSY = 5;
    const SQLITE_LOCKED = 6;

    /**
     * The transaction this connection has open: 'queue' (begun through the
     * writer queue, which holds the turn), 'plain' (BEGIN IMMEDIATE without
     * the extension) or false.
     *
     * @var string|false
     */
    protected $QueuedTransaction = false;

    /** @var bool Set by beginQuery() when the transaction could not start */
    protected $QueuedBeginFailed = false;

    /** @var WriterLock\Queue|false|null The database's queue (null: not looked up yet, false: none) */
    protected $WriterQueueHandle = null;

    /** @var int|false The process that began the queued transaction (a forked child inherits it) */
    protected $QueuedPid = false;

    /** @var bool Set by commitQuery() when the COMMIT failed */
    protected $QueuedCommitFailed = false;

    /** @var bool Set by commitQuery() in a forked child asked to commit its parent's transaction */
    protected $QueuedCommitOfParent = false;

    /** @var bool Whether the connection's busy timeout has been set */
    protected $QueuedBusyTimeoutSet = false;

    /** @var array What was said in this request (see queuedFirstInProcess()) */
    protected static $QueuedSaid = array();

    public function __construct( $parameters )
    {
        // The parent connects and runs PRAGMA journal_mode = wal through
        // query(), which sets the busy timeout first (see queuedBusyTimeout()).
        parent::__construct( $parameters );
        $this->queuedBusyTimeout();
        // The queue is made now, from the connection's own database file:
        // a later chdir() (or a relative name) cannot send the writes of
        // this connection to another lock file.
        if ( $this->IsConnected && $this->DBConnection )
        {
            $this->writerQueue();
        }
    }

    /**
     * Statements wait SQLiteBusyTimeout (SQLiteCLIBusyTimeout on the command
     * line) for a lock SQLite reports, inside a transaction too; set once,
     * before the first statement (the parent's constructor runs its PRAGMA
     * through query()).
     */
    protected function queuedBusyTimeout()
    {
        if ( !$this->QueuedBusyTimeoutSet && $this->IsConnected && $this->DBConnection )
        {
            $this->QueuedBusyTimeoutSet = true;
            $this->DBConnection->busyTimeout( $this->queuedStatementWaitMs() );
        }
    }

    /**
     * The writer queue of this connection's database, or null without the
     * extension (said once per process) or for a database whose directory is
     * missing (logged).
     *
     * @return WriterLock\Queue|null
     */
    public function writerQueue()
    {
        if ( $this->WriterQueueHandle !== null )
        {
            return $this->WriterQueueHandle ?: null;
        }
        $this->WriterQueueHandle = false;
        if ( !extension_loaded( 'writerlock' ) )
        {
            if ( self::queuedFirstInProcess( 'extension not loaded' ) )
            {
                // An error, so that a default install (which logs errors
                // only) shows it.
                eZDebug::writeError( 'The writerlock extension is not loaded (extension=writerlock.so): ' .
                                     'transactions start with BEGIN IMMEDIATE under SQLite\'s busy timeout, ' .
                                     'without the write queue', __METHOD__ );
            }
            return null;
        }
        try
        {
            $this->WriterQueueHandle = $this->IsConnected && $this->DBConnection && (string)$this->DB !== ':memory:'
                ? WriterLock\Queue::forConnection( $this->DBConnection )
                : new WriterLock\Queue( $this->queuedDatabasePath() );
        }
        catch ( WriterLock\Exception $e )
        {
            eZDebug::writeError( $e->getMessage(), __METHOD__ );
        }
        return $this->WriterQueueHandle ?: null;
    }

    /**
     * The database file, as the parent driver opens it.
     *
     * @return string
     */
    protected function queuedDatabasePath()
    {
        if ( method_exists( 'eZSQLite3DB', 'filePath' ) )
        {
            return eZSQLite3DB::filePath( $this->DB );
        }
        $name = (string)$this->DB;
        if ( $name === ':memory:' || ( $name !== '' && $name[0] === '/' ) )
        {
            return $name;
        }
        return 'var/storage/sqlite3/' . $name;
    }

    /**
     * Whether the waits of the command line apply.
     *
     * @return bool
     */
    protected function isCommandLine()
    {
        return PHP_SAPI === 'cli';
    }

    /**
     * A number from [DatabaseSettings], or $default when unset or not a number.
     *
     * @return float
     */
    protected function queuedSetting( $name, $default )
    {
        $ini = eZINI::instance();
        if ( $ini->hasVariable( self::SETTINGS_GROUP, $name ) )
        {
            $value = $ini->variable( self::SETTINGS_GROUP, $name );
            if ( is_numeric( $value ) )
            {
                return (float)$value;
            }
        }
        return (float)$default;
    }

    /**
     * The setting a transaction's wait comes from.
     *
     * @return string
     */
    protected function queuedTransactionSetting()
    {
        return $this->isCommandLine() ? 'SQLiteCLITransactionWait' : 'SQLiteTransactionWait';
    }

    /**
     * How long a transaction waits for its turn, in seconds (at least 1).
     *
     * @return float
     */
    protected function queuedTransactionWait()
    {
        $default = $this->isCommandLine() ? self::CLI_TRANSACTION_WAIT : self::TRANSACTION_WAIT;
        return max( 1.0, $this->queuedSetting( $this->queuedTransactionSetting(), $default ) );
    }

    /**
     * The setting a single statement's wait comes from.
     *
     * @return string
     */
    protected function queuedStatementSetting()
    {
        return $this->isCommandLine() ? 'SQLiteCLIBusyTimeout' : 'SQLiteBusyTimeout';
    }

    /**
     * How long a single statement waits, in milliseconds.
     *
     * @return int
     */
    protected function queuedStatementWaitMs()
    {
        $default = $this->isCommandLine() ? self::CLI_BUSY_TIMEOUT : self::BUSY_TIMEOUT;
        return (int)max( 0, round( $this->queuedSetting( $this->queuedStatementSetting(), $default ) ) );
    }

    /*!
     \reimp
     A start that did not get its turn (or could not start otherwise) is a
     failed transaction: reported at once, with the reason, and nothing has
     been written. The generic begin() counts the transaction whatever the
     start answered; here reportError() ends it (rollback, then eZDBException
     or the error page).
    */
    function begin()
    {
        $this->QueuedBeginFailed = false;
        $result = parent::begin();
        if ( $this->QueuedBeginFailed )
        {
            $this->QueuedBeginFailed = false;
            $this->reportError();
            return false;
        }
        return $result;
    }

    /*!
     \reimp
     Takes the turn in the writer queue, then BEGIN IMMEDIATE.
    */
    function beginQuery()
    {
        $this->QueuedBeginFailed = false;
        if ( !$this->IsConnected || !$this->DBConnection )
        {
            return false;
        }
        $this->queuedCheckTimeLimit();
        $queue = $this->writerQueue();
        if ( $queue )
        {
            try
            {
                $queue->begin( $this->DBConnection, $this->queuedTransactionWait(),
                               '[' . self::SETTINGS_GROUP . '] ' . $this->queuedTransactionSetting() );
            }
            catch ( WriterLock\BusyException $e )
            {
                return $this->queuedBeginFailed( $e->getMessage(), self::SQLITE_BUSY, __METHOD__ );
            }
            catch ( WriterLock\Exception $e )
            {
                return $this->queuedBeginFailed( $e->getMessage(), $e->getCode() ? $e->getCode() : -1, __METHOD__ );
            }
            $this->QueuedTransaction = 'queue';
            $this->QueuedPid = getmypid();
        }
        else
        {
            $wait = $this->queuedTransactionWait();
            $start = microtime( true );
            $this->DBConnection->busyTimeout( (int)round( $wait * 1000 ) );
            $ok = @$this->DBConnection->exec( 'BEGIN IMMEDIATE' );
            if ( !$ok )
            {
                $code = $this->DBConnection->lastErrorCode();
                $reason = $this->DBConnection->lastErrorMsg();
                $this->DBConnection->busyTimeout( $this->queuedStatementWaitMs() );
                if ( $code == self::SQLITE_BUSY || $code == self::SQLITE_LOCKED )
                {
                    $message = sprintf( 'database is busy: the transaction could not start within %s s (waited %.1f s, %s), ' .
                                        'another write held the lock all that time; nothing was written',
                                        self::formatSeconds( $wait ), microtime( true ) - $start,
                                        '[' . self::SETTINGS_GROUP . '] ' . $this->queuedTransactionSetting() );
                    return $this->queuedBeginFailed( $message, self::SQLITE_BUSY, __METHOD__ );
                }
                return $this->queuedBeginFailed( 'the transaction could not start: ' . $reason . '; nothing was written',
                                                 $code, __METHOD__ );
            }
            $this->QueuedTransaction = 'plain';
        }
        // Inside the transaction statements wait like any statement.
        $this->DBConnection->busyTimeout( $this->queuedStatementWaitMs() );
        return true;
    }

    /**
     * Logs once per process when the transaction wait is not below PHP's
     * max_execution_time (where one is set): the wait is cut off there, and
     * the checklist wants SQLiteTransactionWait below every request timeout.
     */
    protected function queuedCheckTimeLimit()
    {
        $limit = (int)ini_get( 'max_execution_time' );
        $wait = $this->queuedTransactionWait();
        if ( $limit > 0 && $wait >= $limit && self::queuedFirstInProcess( 'time limit' ) )
        {
            $setting = '[' . self::SETTINGS_GROUP . '] ' . $this->queuedTransactionSetting();
            eZDebug::writeError( sprintf( '%s is %s s, not below PHP\'s max_execution_time of %d s: a transaction that waits for its turn '
                                          . 'is cut off at max_execution_time. Lower %s to a few seconds below max_execution_time '
                                          . '(and below the web server\'s request timeout), or raise max_execution_time',
                                          $setting, self::formatSeconds( $wait ), $limit, $this->queuedTransactionSetting() ), __METHOD__ );
        }
    }

    /**
     * Whether $what is said for the first time in this process. A PHP-FPM
     * worker serves thousands of requests and static properties start again
     * with each of them, so what is meant once per process is marked with a
     * file named after the process (its pid and start time, which no later
     * process shares) in PHP's temporary directory, next to the marks of
     * other live processes; marks of processes that ended are removed. Where
     * no mark can be made (no /proc, a directory that is not writable) it is
     * said once per request.
     *
     * @param string $what
     * @return bool
     */
    protected static function queuedFirstInProcess( $what )
    {
        if ( isset( self::$QueuedSaid[$what] ) )
        {
            return false;
        }
        self::$QueuedSaid[$what] = true;
        $process = self::queuedProcessMark( 'self' );
        if ( $process === null )
        {
            return true;
        }
        $dir = sys_get_temp_dir() . '/writerlock-said';
        if ( !is_dir( $dir ) && @mkdir( $dir, 0777 ) )
        {
            // Shared by every user's PHP (web server, command line), as /tmp is.
            @chmod( $dir, 01777 );
        }
        $mark = $dir . '/' . $process . '-' . md5( $what );
        $fp = @fopen( $mark, 'x' );
        if ( $fp === false )
        {
            // Said already in this process, or no mark can be made here.
            return !file_exists( $mark );
        }
        fclose( $fp );
        foreach ( (array)glob( $dir . '/*-*-*' ) as $other )
        {
            $parts = explode( '-', basename( $other ) );
            if ( self::queuedProcessMark( $parts[0] ) !== $parts[0] . '-' . $parts[1] )
            {
                @unlink( $other );
            }
        }
        return true;
    }

    /**
     * "<pid>-<start time>" of a live process ($pid: a number, or "self"),
     * from /proc; null when it has ended or /proc cannot tell.
     *
     * @param string $pid
     * @return string|null
     */
    protected static function queuedProcessMark( $pid )
    {
        $stat = @file_get_contents( "/proc/$pid/stat" );
        if ( $stat === false )
        {
            return null;
        }
        // "pid (comm) state ppid ...": the start time is field 22, the 20th after the ")".
        $fields = explode( ' ', substr( $stat, (int)strrpos( $stat, ')' ) + 2 ) );
        return isset( $fields[19] ) ? (int)$stat . '-' . $fields[19] : null;
    }

    /**
     * Whether the open queued transaction was begun by another process (this
     * is a forked child that inherited the connection): its turn is the
     * parent's, and ending it here would end nothing of this process.
     *
     * @return bool
     */
    protected function queuedTransactionOfParent()
    {
        return $this->QueuedTransaction === 'queue' && $this->QueuedPid !== getmypid();
    }

    /**
     * Notes a start that failed: the error, logged with its exact message
     * under $label.
     *
     * @return bool false
     */
    protected function queuedBeginFailed( $message, $code, $label )
    {
        $this->ErrorNumber = $code;
        $this->ErrorMessage = $message;
        $this->QueuedTransaction = false;
        $this->QueuedBeginFailed = true;
        eZDebug::writeError( $message, $label );
        return false;
    }

    /**
     * A limit in seconds the way the messages quote it: 25, 1.5.
     *
     * @return string
     */
    protected static function formatSeconds( $seconds )
    {
        $millis = (int)round( $seconds * 1000 );
        if ( $millis % 1000 === 0 )
        {
            return (string)intdiv( $millis, 1000 );
        }
        return rtrim( rtrim( sprintf( '%.3f', $millis / 1000 ), '0' ), '.' );
    }

    /*!
     \reimp
     A COMMIT that SQLite refuses fails the transaction the way eZ reports
     any failed transaction (reportError(): the "transaction was rollbacked"
     log line, then eZDBException or the error page), and commit() returns
     false. The generic commit() lowers the transaction counter before
     commitQuery() and ignores its answer, which made a refused COMMIT look
     like success.
    */
    function commit()
    {
        $this->QueuedCommitFailed = false;
        $this->QueuedCommitOfParent = false;
        $result = parent::commit();
        if ( $this->QueuedCommitOfParent )
        {
            // Nothing was committed here, and nothing went wrong: the
            // transaction is the parent's (see commitQuery()).
            $this->QueuedCommitOfParent = false;
            return false;
        }
        if ( !$this->QueuedCommitFailed )
        {
            return $result;
        }
        $this->QueuedCommitFailed = false;
        // reportError() acts on a transaction in progress only.
        $this->TransactionCounter = 1;
        $this->reportError();
        $this->TransactionCounter = 0;
        return false;
    }

    /*!
     \reimp
     Commits and gives the turn back. A COMMIT SQLite refuses is logged, and
     the transaction rolled back, so neither it nor the turn outlives the
     commit; commit() then reports the failure.
    */
    function commitQuery()
    {
        $kind = $this->QueuedTransaction;
        if ( $this->queuedTransactionOfParent() )
        {
            // A forked child: the transaction and its turn are the parent's.
            $this->QueuedTransaction = false;
            $this->ErrorNumber = -1;
            $this->ErrorMessage = 'the transaction was begun by the parent process (' . $this->QueuedPid . '); a forked child cannot commit it';
            $this->QueuedCommitOfParent = true;
            return false;
        }
        if ( $kind === 'queue' )
        {
            try
            {
                $ok = $this->WriterQueueHandle->commit( $this->DBConnection );
            }
            catch ( WriterLock\Exception $e )
            {
                // SQLite ended the transaction itself; the turn is back.
                $this->QueuedTransaction = false;
                $this->ErrorNumber = $e->getCode() ? $e->getCode() : -1;
                $this->ErrorMessage = $e->getMessage();
                eZDebug::writeError( $e->getMessage() . '; nothing was written', __METHOD__ );
                $this->QueuedCommitFailed = true;
                return false;
            }
            if ( $ok )
            {
                $this->QueuedTransaction = false;
                return true;
            }
            return $this->queuedCommitRefused();
        }
        if ( $kind === 'plain' )
        {
            if ( @$this->DBConnection->exec( 'COMMIT' ) )
            {
                $this->QueuedTransaction = false;
                return true;
            }
            return $this->queuedCommitRefused();
        }
        return false;
    }

    /*!
     A COMMIT SQLite refused: logs it, rolls the transaction back (which
     gives the turn back) and keeps SQLite's own error for errorNumber() and
     errorMessage(); commit() then reports the failure. Returns false.
    */
    protected function queuedCommitRefused()
    {
        $this->setError();
        $number = $this->ErrorNumber;
        $message = $this->ErrorMessage;
        eZDebug::writeError( 'COMMIT failed: ' . $message . '; the transaction was rolled back, nothing was written', 'eZSQLite3QueuedDB::commitQuery' );
        $this->rollbackQuery();
        $this->ErrorNumber = $number;
        $this->ErrorMessage = $message;
        $this->QueuedCommitFailed = true;
        return false;
    }

    /*!
     \reimp
     Rolls back and gives the turn back. Nothing to cancel when nothing was
     started (the start failed).
    */
    function rollbackQuery()
    {
        if ( $this->queuedTransactionOfParent() )
        {
            // A forked child closing what it inherited (the asynchronous
            // publisher does): the transaction and its turn are the
            // parent's, and nothing is wrong.
            $this->QueuedTransaction = false;
            return true;
        }
        $kind = $this->QueuedTransaction;
        $this->QueuedTransaction = false;
        if ( $kind === 'queue' )
        {
            try
            {
                $ok = $this->WriterQueueHandle->rollback( $this->DBConnection );
            }
            catch ( WriterLock\Exception $e )
            {
                eZDebug::writeError( $e->getMessage(), __METHOD__ );
                return false;
            }
            if ( !$ok )
            {
                $this->setError();
                eZDebug::writeError( 'ROLLBACK failed: ' . $this->ErrorMessage, __METHOD__ );
            }
            return $ok;
        }
        if ( $kind === 'plain' )
        {
            return @$this->DBConnection->exec( 'ROLLBACK' )
                || stripos( (string)$this->DBConnection->lastErrorMsg(), 'no transaction is active' ) !== false;
        }
        return true;
    }

    /*!
     \reimp
     A single write statement outside a transaction takes its turn in the
     queue, within SQLiteBusyTimeout (SQLiteCLIBusyTimeout on the command
     line). Statements inside a transaction, transaction control, PRAGMAs
     (the connection's settings; the constructor's journal_mode = wal, a
     no-op on a database in WAL already, must not wait behind writers) and
     MySQL's session settings go to the parent driver as they are.
    */
    function query( $sql, $server = false )
    {
        $this->queuedBusyTimeout();
        if ( $this->IsConnected && $this->DBConnection && preg_match( '/^\s*PRAGMA\b/i', $sql )
             && $this->queuedPragma( $sql ) )
        {
            return true;
        }
        if ( !$this->IsConnected || !$this->DBConnection
             || $this->TransactionCounter > 0 || $this->QueuedTransaction !== false
             || preg_match( '/^\s*(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE|SET|PRAGMA)\b/i', $sql ) )
        {
            return parent::query( $sql, $server );
        }
        $queue = $this->writerQueue();
        if ( !$queue )
        {
            return parent::query( $sql, $server );
        }
        if ( method_exists( $this, 'rewriteJoinedUpdate' ) )
        {
            $sql = $this->rewriteJoinedUpdate( $sql );
        }
        if ( $this->OutputSQL )
        {
            eZDebug::accumulatorStart( 'sqlite3_query', 'sqlite3_total', 'sqlite3_queries' );
            $this->startTimer();
        }
        $failure = null;
        try
        {
            $queue->exec( $this->DBConnection, $sql, $this->queuedStatementWaitMs() / 1000,
                          '[' . self::SETTINGS_GROUP . '] ' . $this->queuedStatementSetting() );
        }
        catch ( WriterLock\Exception $e )
        {
            $failure = $e;
        }
        if ( $this->OutputSQL )
        {
            $this->endTimer();
            if ( $this->timeTaken() > $this->SlowSQLTimeout )
            {
                eZDebug::accumulatorStop( 'sqlite3_query' );
                $this->reportQuery( 'SQLite3DB', $sql, false, $this->timeTaken() );
            }
        }
        if ( $failure === null )
        {
            if ( class_exists( 'eZDBQueryCache' ) && method_exists( 'eZDBQueryCache', 'noteWrite' ) )
            {
                eZDBQueryCache::noteWrite( $this, $sql );
            }
            return true;
        }
        $this->ErrorNumber = $failure instanceof WriterLock\BusyException ? self::SQLITE_BUSY
                           : ( $failure->getCode() ? $failure->getCode() : -1 );
        if ( $failure instanceof WriterLock\BusyException )
        {
            $this->ErrorMessage = $failure->getMessage();
            eZDebug::writeError( $failure->getMessage(), __METHOD__ );
        }
        else
        {
            // SQLite's own text, which eZ code and logs compare against.
            $this->ErrorMessage = self::sqliteMessage( $failure->getMessage() );
            eZDebug::writeError( "Error: error when executing query: $sql (" . $this->ErrorMessage . ')', __METHOD__ );
        }
        $this->reportError();
        return false;
    }

    /**
     * Runs a PRAGMA, again while SQLite reports the database busy or locked,
     * within the statement wait: switching to WAL (the parent's constructor
     * runs PRAGMA journal_mode = wal on every connect) takes an exclusive
     * lock, for which SQLite answers "database is locked" at once, without
     * its busy handler. When it still fails, the parent's query() runs it
     * once more and reports the failure the stock way.
     */
    protected function queuedPragma( $sql )
    {
        $deadline = microtime( true ) + $this->queuedStatementWaitMs() / 1000;
        $pause = 1000;
        while ( !@$this->DBConnection->exec( $sql ) )
        {
            $code = $this->DBConnection->lastErrorCode();
            if ( ( $code != self::SQLITE_BUSY && $code != self::SQLITE_LOCKED ) || microtime( true ) >= $deadline )
            {
                return false;
            }
            usleep( $pause );
            $pause = min( $pause * 2, 15000 );
        }
        return true;
    }

    /**
     * SQLite's message inside the extension's "the statement failed: <SQLite's message>".
     *
     * @return string
     */
    protected static function sqliteMessage( $message )
    {
        $prefix = 'the statement failed: ';
        return strpos( $message, $prefix ) === 0 ? substr( $message, strlen( $prefix ) ) : $message;
    }

    /*!
     \reimp
     An open transaction is rolled back, and its turn given back, before the
     connection closes.
    */
    function close()
    {
        if ( $this->QueuedTransaction !== false && $this->IsConnected )
        {
            $this->rollbackQuery();
        }
        parent::close();
    }
}
