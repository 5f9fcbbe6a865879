<?php
// Writers exclude each other through the queue itself, not through SQLite:
// while a PHP process holds the turn, another process's
// flock(LOCK_EX|LOCK_NB) on <db>.writer-lock fails (SQLite's own write lock
// would serialize BEGIN IMMEDIATE anyway, so these probes look at the lock
// file); and a queued writer waits for a holder that is not inside any
// SQLite transaction, as a writer of Exponential's driver protocol holds it.
require __DIR__ . '/lib.php';
require __DIR__ . '/standins/autoload.php';

$dir = tmpdir();
$site = "$dir/site";
mkdir( $site );
$path = make_db( $dir );
chdir( $site );

const BEGIN_ARGUMENT = 'the waitSeconds argument of WriterLock\Queue::begin()';
const ACQUIRE_ARGUMENT = 'the waitSeconds argument of WriterLock\Queue::acquire()';

/** The eZ driver on $path with [DatabaseSettings] $values, exceptions on. */
function ez_driver( $path, array $values )
{
    global $dir;
    $file = tempnam( $dir, 'ini' );
    file_put_contents( $file, json_encode( $values ) );
    putenv( "WL_EZINI=$file" );
    eZINI::resetInstance();
    $ezdb = new eZSQLite3QueuedDB( array( 'database' => $path ) );
    $ezdb->setErrorHandling( eZDB::ERROR_HANDLING_EXCEPTIONS );
    check( $ezdb->isConnected(), 'the driver did not connect' );
    return $ezdb;
}

/** Starts helpers/lock_holder.php (plain PHP: flock(LOCK_EX) on the lock file, no SQLite); returns it once it holds. */
function start_lock_holder( $path, $seconds = null )
{
    $args = array( $path . '.writer-lock' );
    if ( $seconds !== null )
    {
        $args[] = $seconds;
    }
    $child = new Child( php_cmd( __DIR__ . '/helpers/lock_holder.php', $args, false ) );
    $line = $child->line();
    check( $line === "held {$child->pid}", "the lock holder said: $line" );
    return $child;
}

/** Fails unless another connection can start a write transaction at once: SQLite itself is free. */
function check_sqlite_free( $path )
{
    $other = new SQLite3( $path );
    $other->busyTimeout( 0 );
    $began = @$other->exec( 'BEGIN IMMEDIATE' );
    check( $began, 'SQLite refused BEGIN IMMEDIATE: ' . $other->lastErrorMsg() . ' (the test needs SQLite free)' );
    $other->exec( 'ROLLBACK' );
    $other->close();
}

t( 'begin(): another process cannot flock() the writer lock until commit(), nor until rollback()', function () use ( $path ) {
    $db = new SQLite3( $path );
    $q = new WriterLock\Queue( $path );
    $q->begin( $db, 5 );                      // creates the lock files
    $q->rollback( $db );
    check_lock( $path, 'free', 'before begin()' );
    $q->begin( $db, 5 );
    check_lock( $path, 'held', 'after begin()' );
    $db->exec( "INSERT INTO pub (worker, seq) VALUES ('exclusion', 1)" );
    check_lock( $path, 'held', 'after a write inside the transaction' );
    check_same( true, $q->commit( $db ), 'commit()' );
    check_lock( $path, 'free', 'after commit()' );
    $q->begin( $db, 5 );
    check_lock( $path, 'held', 'after the second begin()' );
    check_same( true, $q->rollback( $db ), 'rollback()' );
    check_lock( $path, 'free', 'after rollback()' );
} );

t( 'PDO: another process cannot flock() the writer lock from begin() to commit(), nor to rollback()', function () use ( $path ) {
    $pdo = new PDO( "sqlite:$path" );
    $q = WriterLock\Queue::forConnection( $pdo );
    $q->begin( $pdo, 5 );
    check_lock( $path, 'held', 'after begin() on a PDO' );
    $pdo->exec( "INSERT INTO pub (worker, seq) VALUES ('exclusion-pdo', 1)" );
    check_same( true, $q->commit( $pdo ), 'commit()' );
    check_lock( $path, 'free', 'after commit() on a PDO' );
    $q->begin( $pdo, 5 );
    check_lock( $path, 'held', 'after the second begin() on a PDO' );
    check_same( true, $q->rollback( $pdo ), 'rollback()' );
    check_lock( $path, 'free', 'after rollback() on a PDO' );
} );

t( 'transaction(): the writer lock is held while the function runs, free after it returns or throws', function () use ( $path ) {
    $db = new SQLite3( $path );
    $q = WriterLock\Queue::forConnection( $db );
    $seen = $q->transaction( $db, function ( SQLite3 $db ) use ( $path ) {
        $db->exec( "INSERT INTO pub (worker, seq) VALUES ('exclusion', 2)" );
        return lock_probe( $path );
    }, 5 );
    check_same( 'held', $seen, 'what another process found inside transaction()' );
    check_lock( $path, 'free', 'after transaction() returned' );
    $seen = null;
    expect_throw( 'DomainException', function () use ( $q, $db, $path, &$seen ) {
        $q->transaction( $db, function () use ( $path, &$seen ) {
            $seen = lock_probe( $path );
            throw new DomainException( 'changed my mind' );
        }, 5 );
    } );
    check_same( 'held', $seen, 'what another process found inside the transaction() that threw' );
    check_lock( $path, 'free', 'after transaction() threw' );
} );

t( 'Exponential\'s queued driver: the writer lock is held from begin() to commit(), and to rollback()', function () use ( $path ) {
    $ezdb = ez_driver( $path, array() );
    $ezdb->begin();
    check_lock( $path, 'held', 'after the driver\'s begin()' );
    $ezdb->query( "INSERT INTO pub (worker, seq) VALUES ('exclusion', 3)" );
    $ezdb->commit();
    check_lock( $path, 'free', 'after the driver\'s commit()' );
    $ezdb->begin();
    check_lock( $path, 'held', 'after the driver\'s second begin()' );
    $ezdb->rollback();
    check_lock( $path, 'free', 'after the driver\'s rollback()' );
} );

t( 'begin() waits for a holder outside any SQLite transaction: busy after its wait, exact message, SQLite free all along', function () use ( $path ) {
    $holder = start_lock_holder( $path );
    try
    {
        check_sqlite_free( $path );
        $db = new SQLite3( $path );
        $q = new WriterLock\Queue( $path );
        $start = microtime( true );
        $e = expect_throw( 'WriterLock\\BusyException', function () use ( $q, $db ) { $q->begin( $db, 1.0 ); } );
        $elapsed = microtime( true ) - $start;
        check_busy( 'database is busy: the transaction could not start within 1 s (waited 1.0 s, ' . BEGIN_ARGUMENT . '), '
                    . 'another write held the lock all that time; nothing was written', $e->getMessage(), 'message' );
        check_wait( $elapsed, 1.0, 'begin(1.0) gave up after' );
        check_same( $holder->pid, $e->holderPid(), 'holderPid()' );
        check( !$q->holding(), 'holding after the timeout' );
        check_sqlite_free( $path );
        $e = expect_throw( 'WriterLock\\BusyException', function () use ( $q, $db ) {
            $q->exec( $db, "INSERT INTO pub (worker, seq) VALUES ('not run', 1)", 0.5 );
        } );
        check_busy( 'database is busy: the statement waited 0.5 s for another write to end (limit 0.5 s, the waitSeconds argument of WriterLock\Queue::exec()) '
                    . 'and was not run; nothing was written', $e->getMessage(), 'message of exec()' );
        check_same( 0, count_rows( $path, "worker = 'not run'" ), 'rows of the statement that waited' );
    }
    finally
    {
        release_holder( $holder );
    }
    $q->begin( $db, 1.0 );
    check( $q->lastWait() < 0.5, 'after the holder let go begin() waited ' . $q->lastWait() . ' s' );
    $q->rollback( $db );
} );

t( 'begin() gets the turn when a holder outside SQLite lets go during its wait, not before', function () use ( $path ) {
    $holder = start_lock_holder( $path, 0.6 );
    $db = new SQLite3( $path );
    $q = new WriterLock\Queue( $path );
    $q->begin( $db, 5 );
    $began = hrtime( true );
    $line = $holder->line();
    $q->rollback( $db );
    $holder->wait();
    check( preg_match( '/^released (\d+)$/', $line, $m ) === 1, "the holder said: $line" );
    check( $began > (int)$m[1], sprintf( 'begin() returned %.1f ms before the holder let go', ( (int)$m[1] - $began ) / 1e6 ) );
} );

t( 'Exponential\'s queued driver waits for a holder outside SQLite and fails the eZ way after SQLiteCLITransactionWait', function () use ( $path, $site ) {
    @unlink( "$site/var/log/error.log" );
    $ezdb = ez_driver( $path, array( 'SQLiteCLITransactionWait' => '1' ) );
    $holder = start_lock_holder( $path );
    try
    {
        $e = expect_throw( 'eZDBException', function () use ( $ezdb ) {
            $ezdb->begin();
            $ezdb->query( "INSERT INTO pub (worker, seq) VALUES ('ez not run', 1)" );
            $ezdb->commit();
        } );
    }
    finally
    {
        release_holder( $holder );
    }
    check_busy( 'database is busy: the transaction could not start within 1 s (waited 1.0 s, [DatabaseSettings] SQLiteCLITransactionWait), '
                . 'another write held the lock all that time; nothing was written', $e->getMessage(), 'eZDBException message' );
    check_same( 0, count_rows( $path, "worker = 'ez not run'" ), 'rows' );
    $ezdb->begin();
    check( $ezdb->writerQueue()->lastWait() < 0.5, 'after the holder let go the driver waited ' . $ezdb->writerQueue()->lastWait() . ' s' );
    $ezdb->rollback();
} );

t( 'acquire() and release(): another process cannot flock() the writer lock in between, no transaction anywhere; begin(), commit() and a second acquire() refuse meanwhile', function () use ( $path ) {
    $q = new WriterLock\Queue( $path );
    $waited = $q->acquire( 2.0 );
    check( is_float( $waited ) && $waited >= 0 && $waited < 1.0, "acquire() returned $waited" );
    check( $q->holding(), 'not holding after acquire()' );
    check_lock( $path, 'held', 'after acquire()' );
    $e = expect_throw( 'WriterLock\\Exception', function () use ( $q ) { $q->acquire( 1.0 ); } );
    check_same( 'WriterLock\\Queue::acquire(): this queue already holds the writer turn; give it back first (release() after acquire(), '
                . 'commit() or rollback() after begin())', $e->getMessage(), 'a second acquire()' );
    $db = new SQLite3( $path );
    $e = expect_throw( 'WriterLock\\Exception', function () use ( $q, $db ) { $q->begin( $db, 1.0 ); } );
    check_same( 'WriterLock\\Queue::begin(): this queue holds the writer turn it took with acquire(); call release() before beginning '
                . 'a transaction through it', $e->getMessage(), 'begin() under acquire()' );
    $e = expect_throw( 'WriterLock\\Exception', function () use ( $q, $db ) { $q->commit( $db ); } );
    check_same( 'WriterLock\\Queue::commit(): this queue holds the writer turn it took with acquire() and began no transaction; '
                . 'call release() to give the turn back', $e->getMessage(), 'commit() under acquire()' );
    $start = microtime( true );
    $q->exec( $db, "INSERT INTO pub (worker, seq) VALUES ('acquired', 1)", 0.5 );
    check( microtime( true ) - $start < 0.4, 'exec() under acquire() waited for its own turn' );
    check_lock( $path, 'held', 'after exec() under acquire()' );
    $elsewhere = new SQLite3( dirname( $path ) . '/elsewhere.db' );
    $e = expect_throw( 'WriterLock\\Exception', function () use ( $q, $elsewhere ) {
        $q->exec( $elsewhere, 'CREATE TABLE t (x)', 0.5 );
    } );
    check( strpos( $e->getMessage(), "this writer queue is for $path but the connection's database is" ) === 0,
           'exec() under acquire() on another database: ' . $e->getMessage() );
    check_same( false, (bool)$elsewhere->querySingle( "SELECT COUNT(*) FROM sqlite_master WHERE name = 't'" ), 'the refused statement ran' );
    $q->release();
    check( !$q->holding(), 'holding after release()' );
    check_lock( $path, 'free', 'after release()' );
    check_same( 1, count_rows( $path, "worker = 'acquired'" ), 'rows written under acquire()' );
    $e = expect_throw( 'WriterLock\\Exception', function () use ( $q ) { $q->release(); } );
    check_same( 'WriterLock\\Queue::release(): this queue does not hold the writer turn, so there is nothing to release; call acquire() '
                . 'first, and release() once for each acquire()', $e->getMessage(), 'release() without a turn' );
    $q->begin( $db, 1.0 );
    $e = expect_throw( 'WriterLock\\Exception', function () use ( $q ) { $q->release(); } );
    check( strpos( $e->getMessage(), 'holds the writer turn for a transaction it began' ) !== false, 'release() inside a transaction: ' . $e->getMessage() );
    check_lock( $path, 'held', 'after release() refused inside a transaction' );
    $q->rollback( $db );
    $other = new WriterLock\Queue( $path );
    $other->acquire( 1.0 );
    check_lock( $path, 'held', 'after acquire() by another queue object' );
    unset( $other );
    check_lock( $path, 'free', 'after the queue object that acquired was freed' );
} );

t( 'acquire() waits for a holder outside SQLite: busy after its wait, exact message', function () use ( $path ) {
    $holder = start_lock_holder( $path );
    try
    {
        $q = new WriterLock\Queue( $path );
        $start = microtime( true );
        $e = expect_throw( 'WriterLock\\BusyException', function () use ( $q ) { $q->acquire( 0.2 ); } );
        check_wait( microtime( true ) - $start, 1.0, 'acquire(0.2) gave up after' );
        check_busy( 'database is busy: the transaction could not start within 1 s (waited 1.0 s, ' . ACQUIRE_ARGUMENT . '), '
                    . 'another write held the lock all that time; nothing was written', $e->getMessage(), 'message' );
        check_same( $holder->pid, $e->holderPid(), 'holderPid()' );
        check_same( $e->waited(), $q->lastWait(), 'lastWait()' );
        check( !$q->holding(), 'holding after the timeout' );
    }
    finally
    {
        release_holder( $holder );
    }
    $q->acquire( 1.0 );
    $q->release();
} );

t( 'turns taken with acquire() by 4 processes at once never overlap', function () use ( $path ) {
    $takers = array();
    for ( $i = 0; $i < 4; $i++ )
    {
        $takers[] = $taker = new Child( php_cmd( __DIR__ . '/helpers/turn_taker.php', array( $path, 8, 15 ) ) );
        check_same( 'ready', $taker->line(), 'turn taker' );
    }
    foreach ( $takers as $taker )
    {
        $taker->send( "go\n" );
    }
    $turns = array();
    foreach ( $takers as $taker )
    {
        $code = $taker->wait();
        check( $code === 0, "a turn taker exited with $code: {$taker->err}" );
        foreach ( explode( "\n", trim( $taker->out ) ) as $line )
        {
            list( $enter, $leave ) = array_map( 'intval', explode( ' ', $line ) );
            $turns[] = array( $enter, $leave, $taker->pid );
        }
    }
    check_same( 32, count( $turns ), 'turns taken' );
    sort( $turns );
    for ( $i = 1; $i < count( $turns ); $i++ )
    {
        list( $enter, , $pid ) = $turns[$i];
        list( , $leave, $before ) = $turns[$i - 1];
        check( $enter >= $leave, sprintf( 'process %d entered %.1f ms before process %d left its turn', $pid, ( $leave - $enter ) / 1e6, $before ) );
    }
} );
