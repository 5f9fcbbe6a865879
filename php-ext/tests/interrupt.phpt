--TEST--
Waits a person can interrupt: pcntl_async_signals() handlers run during a wait, and no wait outlives max_execution_time
--EXTENSIONS--
pcntl
posix
sqlite3
writerlock
--FILE--
<?php
require __DIR__ . '/lib.php';
$path = make_db( tmpdir() );
$holder = start_holder( $path );
$db = new SQLite3( $path );
$q = new WriterLock\Queue( $path );

/** Sends $signal to this process after $delay seconds, from another process. */
function signal_later( $signal, $delay )
{
    return new Child( array( '/bin/sh', '-c', sprintf( 'sleep %.1f; kill -%d %d', $delay, $signal, getmypid() ) ) );
}

/** Runs $fn, prints what it threw (a busy message compared with $busy, when given, through busy_as_expected()). */
function attempt( callable $fn, $busy = null )
{
    $start = microtime( true );
    try
    {
        $fn();
        echo "no exception\n";
    }
    catch ( Throwable $e )
    {
        echo get_class( $e ), ': ', $busy === null ? $e->getMessage() : busy_as_expected( $busy, $e->getMessage() ), "\n";
    }
    return microtime( true ) - $start;
}

pcntl_async_signals( true );

echo "-- a handler that throws ends the wait at once; the turn is not taken\n";
pcntl_signal( SIGUSR1, function () { throw new RuntimeException( 'stopped by SIGUSR1' ); } );
$sender = signal_later( SIGUSR1, 0.3 );
$took = attempt( function () use ( $q, $db ) { $q->begin( $db, 20 ); } );
$sender->wait();
var_dump( $took < 3.0, $q->holding() );

echo "-- the same for a queued statement\n";
$sender = signal_later( SIGUSR1, 0.3 );
$took = attempt( function () use ( $q, $db ) { $q->exec( $db, "INSERT INTO pub (worker) VALUES ('interrupted')", 20.0 ); } );
$sender->wait();
var_dump( $took < 3.0, count_rows( $path, "worker = 'interrupted'" ) );

echo "-- a handler that returns: it runs, and the wait goes on to its own limit\n";
$ran = 0;
pcntl_signal( SIGUSR1, function () use ( &$ran ) { $ran++; } );
$sender = signal_later( SIGUSR1, 0.3 );
$took = attempt( function () use ( $q, $db ) { $q->begin( $db, 1.5 ); }, 'database is busy: the transaction could not start within 1.5 s (waited 1.5 s, the waitSeconds argument of WriterLock\Queue::begin()), another write held the lock all that time; nothing was written' );
$sender->wait();
var_dump( $ran, $took >= 1.5 && $took < 4.0 );

echo "-- a wait longer than the time max_execution_time leaves ends before it, naming it\n";
set_time_limit( 2 );
$took = attempt( function () use ( $q, $db ) { $q->begin( $db, 30 ); } );
set_time_limit( 0 );
var_dump( $took >= 1.5 && $took < 2.5 );
set_time_limit( 1 );
$took = attempt( function () use ( $q, $db ) { $q->exec( $db, "INSERT INTO pub (worker) VALUES ('late')", 30.0 ); } );
set_time_limit( 0 );
var_dump( $took >= 0.7 && $took < 1.5, count_rows( $path, "worker = 'late'" ) );

echo "-- a handler that calls exit() (SIGTERM) ends the script at once, with its status\n";
$child = new Child( php_cmd( __DIR__ . '/helpers/signal_exit.php', array( $path ) ) );
echo $child->line(), "\n";
usleep( 300000 );
$start = microtime( true );
posix_kill( $child->pid, SIGTERM );
$code = $child->wait();
echo $child->out, $child->err, "exit status $code\n";
var_dump( microtime( true ) - $start < 2.0 );

echo "-- SIGTERM without a PHP handler still ends a script inside a connection call at once\n";
$child = new Child( php_cmd( __DIR__ . '/helpers/long_statement.php', array( $path ) ) );
echo $child->line(), "\n";
usleep( 300000 );
$start = microtime( true );
posix_kill( $child->pid, SIGTERM );
$child->wait();
echo trim( $child->out ) === '' ? "no more output\n" : $child->out;
var_dump( microtime( true ) - $start < 2.0 );

release_holder( $holder );
echo "-- with the lock free again the same queue begins at once\n";
$q->begin( $db, 1 );
var_dump( $q->rollback( $db ) );
?>
--EXPECTF--
-- a handler that throws ends the wait at once; the turn is not taken
RuntimeException: stopped by SIGUSR1
bool(true)
bool(false)
-- the same for a queued statement
RuntimeException: stopped by SIGUSR1
bool(true)
int(0)
-- a handler that returns: it runs, and the wait goes on to its own limit
WriterLock\BusyException: database is busy: the transaction could not start within 1.5 s (waited 1.5 s, the waitSeconds argument of WriterLock\Queue::begin()), another write held the lock all that time; nothing was written
int(1)
bool(true)
-- a wait longer than the time max_execution_time leaves ends before it, naming it
WriterLock\BusyException: database is busy: the transaction could not start within 2 s (waited %s s, max_execution_time), another write held the lock all that time; nothing was written
bool(true)
WriterLock\BusyException: database is busy: the statement waited %s s for another write to end (limit 1 s, max_execution_time) and was not run; nothing was written
bool(true)
int(0)
-- a handler that calls exit() (SIGTERM) ends the script at once, with its status
waiting
handler
shutdown
exit status 3
bool(true)
-- SIGTERM without a PHP handler still ends a script inside a connection call at once
running
no more output
bool(true)
-- with the lock free again the same queue begins at once
bool(true)
