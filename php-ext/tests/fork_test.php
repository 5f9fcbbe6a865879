<?php
// A long-lived worker (this process) serves jobs with one WriterLock\Queue
// and forks children with pcntl_fork(): no child ever frees the parent's
// turn, and every child takes turns of its own.
require __DIR__ . '/lib.php';

if ( !function_exists( 'pcntl_fork' ) )
{
    t( 'pcntl is available', function () {
        throw new TestFailure( 'pcntl_fork() is missing: Debian builds it into php8.2-cli; install or rebuild PHP with --enable-pcntl' );
    } );
    exit;
}

$dir = tmpdir();
$path = make_db( $dir );
$queue = new WriterLock\Queue( $path );     // the worker's one queue, for every job
$db = new SQLite3( $path );

/**
 * Forks a child that runs $job($resultFile) and exits; returns [pid, resultFile].
 * The child reports through a file: JSON written by $job.
 */
function fork_child( callable $job )
{
    $file = tempnam( sys_get_temp_dir(), 'wlfork' );
    $pid = pcntl_fork();
    if ( $pid === -1 )
    {
        throw new TestFailure( 'pcntl_fork() failed' );
    }
    if ( $pid === 0 )
    {
        $GLOBALS['wl_ran'] = 1;            // the harness's accounting belongs to the parent
        $GLOBALS['wl_failed'] = 0;
        $code = 0;
        try
        {
            $report = $job();
        }
        catch ( Throwable $e )
        {
            $report = array( 'error' => get_class( $e ) . ': ' . $e->getMessage() . ' at line ' . $e->getLine() );
            $code = 1;
        }
        file_put_contents( $file, json_encode( $report ) );
        exit( $code );
    }
    return array( $pid, $file );
}

function collect( array $children )
{
    $reports = array();
    foreach ( $children as list( $pid, $file ) )
    {
        pcntl_waitpid( $pid, $status );
        $report = json_decode( (string)file_get_contents( $file ), true );
        unlink( $file );
        check( pcntl_wifexited( $status ) && pcntl_wexitstatus( $status ) === 0,
               "child $pid failed: " . json_encode( $report ) );
        $reports[$pid] = $report;
    }
    return $reports;
}

t( 'children of a worker that holds the turn cannot free it, and see it held', function () use ( $queue, $db, $path ) {
    $parent = getmypid();
    $queue->begin( $db, 5 );
    $children = array();
    for ( $i = 0; $i < 3; $i++ )
    {
        $children[] = fork_child( function () use ( $queue, $path, $parent ) {
            $own = new SQLite3( $path );
            $report = array( 'holding' => $queue->holding() );
            foreach ( array( 'commit', 'rollback' ) as $method )
            {
                try
                {
                    $queue->$method( $own );
                    $report[$method] = 'returned';
                }
                catch ( WriterLock\Exception $e )
                {
                    $report[$method] = $e->getMessage();
                }
            }
            try
            {
                $queue->begin( $own, 1 );
                $report['begin'] = 'got the turn';
            }
            catch ( WriterLock\BusyException $e )
            {
                $report['begin'] = 'busy';
                $report['holder'] = $e->holderPid();
            }
            return $report;
        } );
    }
    $reports = collect( $children );
    $notHolding = 'there is no queued transaction to end: this writer queue does not hold the writer turn; call begin() first';
    foreach ( $reports as $pid => $r )
    {
        check_same( false, $r['holding'], "child $pid holding()" );
        check_same( $notHolding, $r['commit'], "child $pid commit()" );
        check_same( $notHolding, $r['rollback'], "child $pid rollback()" );
        check_same( 'busy', $r['begin'], "child $pid begin() while the parent holds" );
        check_same( $parent, $r['holder'], "child $pid saw the holder" );
    }
    check( $queue->holding(), 'the parent lost its turn' );
    check_lock( $path, 'held', 'after the children exited, the parent still in its transaction' );
    $outsider = probe_begin( $path, 0.2 );
    check( !$outsider['ok'] && $outsider['holder'] === $parent, 'after the children exited the turn was free: ' . json_encode( $outsider ) );
    $db->exec( "INSERT INTO pub (worker, seq) VALUES ('parent', 0)" );
    check_same( true, $queue->commit( $db ), 'the parent\'s commit' );
} );

t( 'a worker serves jobs with one queue; each job\'s forked children take turns of their own', function () use ( $queue, $db, $path ) {
    $jobs = 4;
    $perJob = 3;
    for ( $job = 1; $job <= $jobs; $job++ )
    {
        $children = array();
        for ( $i = 0; $i < $perJob; $i++ )
        {
            $children[] = fork_child( function () use ( $queue, $path, $job ) {
                $own = new SQLite3( $path );
                $queue->begin( $own, 10 );
                $held = $queue->holding();
                $own->exec( "INSERT INTO pub (worker, seq) VALUES ('child-" . getmypid() . "', $job)" );
                $committed = $queue->commit( $own );
                return array( 'held' => $held, 'committed' => $committed, 'after' => $queue->holding() );
            } );
        }
        // The worker writes too, while its children do.
        $queue->begin( $db, 10 );
        $db->exec( "INSERT INTO pub (worker, seq) VALUES ('parent', $job)" );
        check_same( true, $queue->commit( $db ), "the worker's commit in job $job" );
        foreach ( collect( $children ) as $pid => $r )
        {
            check_same( array( 'held' => true, 'committed' => true, 'after' => false ), $r, "child $pid of job $job" );
        }
    }
    check_same( $jobs * $perJob, count_rows( $path, "worker LIKE 'child-%'" ), 'rows of the children' );
    check_same( $jobs + 1, count_rows( $path, "worker = 'parent'" ), 'rows of the worker' );
    check( !$queue->holding(), 'the worker holds a turn after its jobs' );
} );

t( 'a child killed while holding its own turn leaves the queue free', function () use ( $queue, $db, $path ) {
    list( $pid, $file ) = fork_child( function () use ( $queue, $path ) {
        $own = new SQLite3( $path );
        $queue->begin( $own, 5 );
        posix_kill( getmypid(), SIGKILL );
        return array();
    } );
    pcntl_waitpid( $pid, $status );
    @unlink( $file );
    check( pcntl_wifsignaled( $status ), 'the child was not killed' );
    $queue->begin( $db, 5 );
    check( $queue->lastWait() < 0.2, 'the worker waited ' . $queue->lastWait() . ' s after its child died' );
    $queue->rollback( $db );
} );

t( 'children forked while the worker holds the turn, exiting normally, leave it held', function () use ( $queue, $db, $path ) {
    $queue->begin( $db, 5 );
    $children = array();
    for ( $i = 0; $i < 4; $i++ )
    {
        $children[] = fork_child( function () use ( $queue ) {
            return array( 'holding' => $queue->holding() );   // exits with the inherited queue and connection
        } );
    }
    foreach ( collect( $children ) as $pid => $r )
    {
        check_same( false, $r['holding'], "child $pid holding()" );
    }
    check( $queue->holding(), 'the worker lost its turn' );
    check_lock( $path, 'held', 'after the children exited, the worker still in its transaction' );
    $outsider = probe_begin( $path, 0.2 );
    check( !$outsider['ok'], 'another process got the turn the worker holds' );
    $queue->commit( $db );
    check_lock( $path, 'free', 'after the worker committed' );
    check( probe_begin( $path, 1 )['waited'] < 0.2, 'the turn was not free after the worker committed' );
} );
