<?php
// Waits that run out: a BusyException after about the wait, with the driver's
// exact text and fields; nothing written; nothing left held.
require __DIR__ . '/lib.php';

$dir = tmpdir();
$path = make_db( $dir );

function timed( callable $fn )
{
    $start = microtime( true );
    $e = expect_throw( 'WriterLock\\BusyException', $fn );
    return array( $e, microtime( true ) - $start );
}

$holder = start_holder( $path );

t( 'begin() gives up after its wait: exact text and fields, nothing written', function () use ( $path, $holder ) {
    $db = new SQLite3( $path );
    $q = new WriterLock\Queue( $path );
    list( $e, $elapsed ) = timed( function () use ( $q, $db ) { $q->begin( $db, 1.5 ); } );
    check_wait( $elapsed, 1.5, 'begin(1.5) gave up after' );
    check_busy( 'database is busy: the transaction could not start within 1.5 s (waited 1.5 s, the waitSeconds argument of WriterLock\Queue::begin()), '
                . 'another write held the lock all that time; nothing was written', $e->getMessage(), 'message' );
    check( strpos( $e->getMessage(), '(waited ' . sprintf( '%.1f', $e->waited() ) . ' s,' ) !== false,
           'the message does not say waited() = ' . $e->waited() . ': ' . $e->getMessage() );
    check_wait( $e->waited(), 1.5, 'waited()' );
    check( $e->waited() <= $elapsed, 'waited() ' . $e->waited() . " s is more than the $elapsed s begin() took" );
    check_same( 1.5, $e->limit(), 'limit()' );
    check_same( 'the waitSeconds argument of WriterLock\Queue::begin()', $e->setting(), 'setting()' );
    check_same( $holder->pid, $e->holderPid(), 'holderPid()' );
    check_same( 5, $e->getCode(), 'getCode()' );
    check( !$q->holding(), 'holding after the timeout' );
    check_same( $e->waited(), $q->lastWait(), 'lastWait()' );
    // Nothing started on the connection: a transaction of its own starts.
    check( $db->exec( 'BEGIN' ) && $db->exec( 'ROLLBACK' ), 'the connection was left inside a transaction' );
} );

t( 'a wait below 1 s is raised to 1 s; a custom setting name is quoted', function () use ( $path ) {
    $db = new SQLite3( $path );
    $q = new WriterLock\Queue( $path );
    list( $e, $elapsed ) = timed( function () use ( $q, $db ) { $q->begin( $db, 0.2, '[DatabaseSettings] SQLiteCLITransactionWait' ); } );
    check_wait( $elapsed, 1.0, 'begin(0.2) gave up after' );
    check_same( 1.0, $e->limit(), 'limit()' );
    $text = 'database is busy: the transaction could not start within 1 s (waited 1.0 s, [DatabaseSettings] SQLiteCLITransactionWait), '
          . 'another write held the lock all that time; nothing was written';
    check_busy( $text, $e->getMessage(), 'message' );
} );

t( 'exec() of a write gives up after the busy timeout and does not run', function () use ( $path ) {
    $db = new SQLite3( $path );
    $q = new WriterLock\Queue( $path );
    list( $e, $elapsed ) = timed( function () use ( $q, $db ) {
        $q->exec( $db, "INSERT INTO pub (worker, seq) VALUES ('timed out', 1)", 0.5 );
    } );
    check_wait( $elapsed, 0.5, 'exec(0.5) gave up after' );
    $text = 'database is busy: the statement waited 0.5 s for another write to end (limit 0.5 s, the waitSeconds argument of WriterLock\Queue::exec()) '
          . 'and was not run; nothing was written';
    check_busy( $text, $e->getMessage(), 'message' );
    check_same( 0.5, $e->limit(), 'limit()' );
    check_same( 'the waitSeconds argument of WriterLock\Queue::exec()', $e->setting(), 'setting()' );
    check( !$q->holding(), 'holding' );
} );

t( 'after the holder commits, the same queue begins at once and nothing of the timed-out work is there', function () use ( $path, $holder ) {
    release_holder( $holder );
    $db = new SQLite3( $path );
    $q = new WriterLock\Queue( $path );
    $q->begin( $db, 1 );
    check( $q->lastWait() < 0.2, 'lastWait(): ' . $q->lastWait() );
    $q->commit( $db );
    check_same( 0, count_rows( $path, "worker = 'timed out'" ), 'rows of the statement that timed out' );
} );

t( 'a writer outside the queue (BEGIN IMMEDIATE in another process) is waited for within the wait', function () use ( $path ) {
    $outsider = start_holder( $path, 'sqlite' );
    $db = new SQLite3( $path );
    $q = new WriterLock\Queue( $path );
    list( $e, $elapsed ) = timed( function () use ( $q, $db ) { $q->begin( $db, 1 ); } );
    check_wait( $elapsed, 1.0, 'gave up after' );
    check_busy( 'database is busy: the transaction could not start within 1 s (waited 1.0 s, the waitSeconds argument of WriterLock\Queue::begin()), '
                . 'another write held the lock all that time; nothing was written', $e->getMessage(), 'message' );
    check( !$q->holding(), 'holding after SQLite refused the start' );
    release_holder( $outsider );
    $q->begin( $db, 1 );
    $q->commit( $db );
} );
