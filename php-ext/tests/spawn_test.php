<?php
// A program a writer starts keeps none of the writer's lock files: a holder
// that starts a long-running program and then dies leaves the turn free for
// the next writer at once, though the program lives on. PHP's exec() starts
// its shell with posix_spawn (no fork handlers run), so only O_CLOEXEC on the
// lock files keeps them from the program: that case fails without it.
// proc_open() forks, and the core's fork handler closes the lock files in the
// child before the exec: that case fails only without both.
require __DIR__ . '/lib.php';

$dir = tmpdir();
$path = make_db( $dir );

/** Runs helpers/spawn_and_die.php; returns the pid of the program it left running. */
function spawn_and_die( $path, $how )
{
    $child = new Child( php_cmd( __DIR__ . '/helpers/spawn_and_die.php', array( $path, $how ) ) );
    $line = $child->line();
    check( preg_match( '/^spawned (\d+)$/', $line, $m ) === 1, "the holder said: $line" );
    $child->wait();
    return (int)$m[1];
}

foreach ( array( 'exec' => 'exec() (a shell through posix_spawn)', 'proc_open' => 'proc_open()' ) as $how => $what )
{
    t( "a program started with $what by a holder that died does not keep the turn", function () use ( $path, $how ) {
        $program = spawn_and_die( $path, $how );
        try
        {
            check( posix_kill( $program, 0 ), "the program $program the holder started is not running" );
            check_lock( $path, 'free', "after the holder died, its program $program still running" );
            $db = new SQLite3( $path );
            $q = new WriterLock\Queue( $path );
            $q->begin( $db, 2.0 );
            check( $q->lastWait() < 1.0, 'the next writer waited ' . $q->lastWait() . ' s' );
            $q->rollback( $db );
            check_same( 0, count_rows( $path, "worker = 'spawn_and_die'" ), 'rows of the holder that died' );
        }
        finally
        {
            posix_kill( $program, SIGKILL );
        }
    } );
}
