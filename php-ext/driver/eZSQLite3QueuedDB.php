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
 * transaction or the query the way eZ drivers do (reportError()). Without
 * the extension loaded the driver says so once and starts transactions with
 * BEGIN IMMEDIATE under SQLite's busy timeout.
 *
 * Selected in site.ini (settings/override/site.ini.append.php):
 *
 *     [DatabaseSettings]
 *     DatabaseImplementation=sqlite3
 *     ImplementationAlias[sqlite3]=eZSQLite3QueuedDB
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

    /** @var bool Whether the missing extension was reported in this process */
    protected static $ExtensionMissingReported = false;

    public function __construct( $parameters )
    {
        parent::__construct( $parameters );
        // Statements wait SQLiteBusyTimeout (SQLiteCLIBusyTimeout on the
        // command line) for a lock SQLite reports, inside a transaction too.
        if ( $this->IsConnected && $this->DBConnection )
        {
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
            if ( !self::$ExtensionMissingReported )
            {
                self::$ExtensionMissingReported = true;
                eZDebug::writeWarning( 'The writerlock extension is not loaded (extension=writerlock.so): ' .
                                       'transactions start with BEGIN IMMEDIATE under SQLite\'s busy timeout, ' .
                                       'without the write queue', __METHOD__ );
            }
            return null;
        }
        try
        {
            $this->WriterQueueHandle = new WriterLock\Queue( $this->queuedDatabasePath() );
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
     Commits and gives the turn back. A COMMIT SQLite refuses is logged, and
     the transaction rolled back, so neither it nor the turn outlives the
     commit.
    */
    function commitQuery()
    {
        $kind = $this->QueuedTransaction;
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
                $this->reportError();
                return false;
            }
            if ( $ok )
            {
                $this->QueuedTransaction = false;
                return true;
            }
            $this->setError();
            eZDebug::writeError( 'COMMIT failed: ' . $this->ErrorMessage . '; the transaction was rolled back, nothing was written', __METHOD__ );
            $this->rollbackQuery();
            $this->reportError();
            return false;
        }
        if ( $kind === 'plain' )
        {
            if ( @$this->DBConnection->exec( 'COMMIT' ) )
            {
                $this->QueuedTransaction = false;
                return true;
            }
            $this->setError();
            eZDebug::writeError( 'COMMIT failed: ' . $this->ErrorMessage . '; the transaction was rolled back, nothing was written', __METHOD__ );
            $this->rollbackQuery();
            $this->reportError();
            return false;
        }
        return false;
    }

    /*!
     \reimp
     Rolls back and gives the turn back. Nothing to cancel when nothing was
     started (the start failed).
    */
    function rollbackQuery()
    {
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
        $this->ErrorMessage = $failure->getMessage();
        if ( $failure instanceof WriterLock\BusyException )
        {
            eZDebug::writeError( $failure->getMessage(), __METHOD__ );
        }
        else
        {
            eZDebug::writeError( $failure->getMessage() . "\nin query: " . $sql, __METHOD__ );
        }
        $this->reportError();
        return false;
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
