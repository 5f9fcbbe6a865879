<?php
/**
 * Helpers of the writerlock PHP tests: child processes, temporary databases,
 * a process holding the turn. The scenario scripts (*_test.php) also use the
 * small harness here: each t('name', fn) prints "ok - name" or "not ok -
 * name: reason", and the .phpt that runs the script expects every "ok" line.
 */

error_reporting( E_ALL );
ini_set( 'display_errors', 'stderr' );

final class TestFailure extends Exception {}

$GLOBALS['wl_failed'] = 0;
$GLOBALS['wl_ran'] = 0;

function t( $name, callable $fn )
{
    if ( $GLOBALS['wl_ran']++ === 0 )
    {
        register_shutdown_function( function () {
            if ( $GLOBALS['wl_failed'] > 0 )
            {
                exit( 1 );
            }
        } );
    }
    $start = microtime( true );
    try
    {
        $fn();
        printf( "ok - %s (%.2f s)\n", $name, microtime( true ) - $start );
    }
    catch ( Throwable $e )
    {
        $GLOBALS['wl_failed']++;
        $where = $e instanceof TestFailure ? '' : ' [' . get_class( $e ) . ' at ' . basename( $e->getFile() ) . ':' . $e->getLine() . ']';
        printf( "not ok - %s: %s%s\n", $name, str_replace( "\n", "\n    ", $e->getMessage() ), $where );
    }
    flush();
}


/** Fails the test with $message unless $condition holds. */
function check( $condition, $message )
{
    if ( !$condition )
    {
        throw new TestFailure( $message );
    }
}

function check_same( $expected, $actual, $what )
{
    if ( $expected !== $actual )
    {
        throw new TestFailure( $what . ": expected " . var_export( $expected, true ) . ", got " . var_export( $actual, true ) );
    }
}

/** Runs $fn and returns the Throwable it throws; fails when it throws none or another class. */
function expect_throw( $class, callable $fn )
{
    try
    {
        $fn();
    }
    catch ( Throwable $e )
    {
        if ( !( $e instanceof $class ) )
        {
            throw new TestFailure( "expected $class, got " . get_class( $e ) . ': ' . $e->getMessage() );
        }
        return $e;
    }
    throw new TestFailure( "expected $class, nothing was thrown" );
}

/** A fresh temporary directory, removed at exit. */
function tmpdir( $tag = 'wl' )
{
    $dir = sys_get_temp_dir() . '/' . $tag . '-' . getmypid() . '-' . bin2hex( random_bytes( 4 ) );
    mkdir( $dir, 0777, true );
    $pid = getmypid();
    register_shutdown_function( function () use ( $dir, $pid ) {
        if ( getmypid() === $pid )
        {
            exec( 'rm -rf ' . escapeshellarg( $dir ) );
        }
    } );
    return $dir;
}

/**
 * The extension's absolute path: WL_EXT (set by run.sh), else the file this
 * process loaded it from (PHP's own run-tests.php run directly, with
 * `-d extension=/path/to/libwriterlock_php.so`), else the newest build under
 * target/. Exits with one line saying what to do when there is none.
 */
function ext_path()
{
    static $found = null;
    if ( $found !== null )
    {
        return $found;
    }
    $ext = getenv( 'WL_EXT' );
    if ( $ext !== false && $ext !== '' )
    {
        if ( !is_file( $ext ) )
        {
            fwrite( STDERR, "WL_EXT names $ext, which does not exist; build it with cargo build -p writerlock-php, or run php-ext/tests/run.sh\n" );
            exit( 2 );
        }
        return $found = $ext;
    }
    if ( extension_loaded( 'writerlock' ) )
    {
        // The shared object mapped into this process whose name says writerlock.
        foreach ( (array)@file( '/proc/self/maps', FILE_IGNORE_NEW_LINES ) as $line )
        {
            $path = preg_replace( '/^(\S+\s+){5}/', '', $line );
            if ( preg_match( '/(^|\/)(lib)?writerlock(_php)?\.so$/', $path ) && is_file( $path ) )
            {
                return $found = $path;
            }
        }
    }
    $builds = array();
    foreach ( array( 'release', 'debug' ) as $profile )
    {
        $candidate = wl_root() . "/target/$profile/libwriterlock_php.so";
        if ( is_file( $candidate ) )
        {
            $builds[$candidate] = filemtime( $candidate );
        }
    }
    if ( $builds )
    {
        arsort( $builds );
        return $found = key( $builds );
    }
    fwrite( STDERR, "the writerlock extension is not built: run php-ext/tests/run.sh (it builds it), or cargo build -p writerlock-php and "
                  . "php run-tests.php -d extension=\$PWD/target/debug/libwriterlock_php.so php-ext/tests\n" );
    exit( 2 );
}

/** The repository's root: WL_ROOT (set by run.sh), else two levels above the tests. */
function wl_root()
{
    $root = getenv( 'WL_ROOT' );
    return $root !== false && $root !== '' ? $root : dirname( __DIR__, 2 );
}

/** The command line of a PHP process with (or without) the extension. */
function php_cmd( $script, array $args = array(), $withExtension = true )
{
    $cmd = array( PHP_BINARY );
    if ( $withExtension )
    {
        $cmd[] = '-d';
        $cmd[] = 'extension=' . ext_path();
    }
    $cmd[] = $script;
    foreach ( $args as $arg )
    {
        $cmd[] = (string)$arg;
    }
    return $cmd;
}

/** A running child process with pipes. */
final class Child
{
    public $proc;
    public $stdin;
    public $stdout;
    public $stderr;
    public $pid;
    public $out = '';
    public $err = '';
    public $code = null;

    function __construct( array $cmd, $cwd = null, array $env = null )
    {
        $this->proc = proc_open( $cmd, array( 0 => array( 'pipe', 'r' ), 1 => array( 'pipe', 'w' ), 2 => array( 'pipe', 'w' ) ),
                                 $pipes, $cwd, $env );
        if ( !is_resource( $this->proc ) )
        {
            throw new TestFailure( 'could not start ' . implode( ' ', $cmd ) );
        }
        list( $this->stdin, $this->stdout, $this->stderr ) = $pipes;
        $status = proc_get_status( $this->proc );
        $this->pid = $status['pid'];
    }

    /** Reads one line of the child's output (blocking, with a timeout). */
    function line( $timeout = 30.0 )
    {
        $deadline = microtime( true ) + $timeout;
        while ( true )
        {
            $read = array( $this->stdout );
            $write = $except = null;
            $left = $deadline - microtime( true );
            if ( $left <= 0 )
            {
                throw new TestFailure( "no line from child {$this->pid} within {$timeout} s; stderr: " . $this->drainErr() );
            }
            if ( stream_select( $read, $write, $except, (int)$left, (int)( ( $left - (int)$left ) * 1e6 ) ) )
            {
                $line = fgets( $this->stdout );
                if ( $line === false )
                {
                    throw new TestFailure( "child {$this->pid} closed its output; stderr: " . $this->drainErr() );
                }
                return rtrim( $line, "\n" );
            }
        }
    }

    function send( $text )
    {
        fwrite( $this->stdin, $text );
        fflush( $this->stdin );
    }

    private function drainErr()
    {
        stream_set_blocking( $this->stderr, false );
        return trim( (string)stream_get_contents( $this->stderr ) );
    }

    /** Waits for the child to end; returns its exit code. */
    function wait()
    {
        if ( $this->code !== null )
        {
            return $this->code;
        }
        if ( is_resource( $this->stdin ) )
        {
            fclose( $this->stdin );
        }
        $this->out .= stream_get_contents( $this->stdout );
        $this->err .= stream_get_contents( $this->stderr );
        fclose( $this->stdout );
        fclose( $this->stderr );
        $this->code = proc_close( $this->proc );
        return $this->code;
    }
}

/** Starts many children, waits for them all, returns them. */
function run_all( array $cmds )
{
    $children = array();
    foreach ( $cmds as $cmd )
    {
        $children[] = new Child( $cmd );
    }
    foreach ( $children as $child )
    {
        $child->wait();
    }
    return $children;
}

/** A database with a `pub` table in WAL mode. */
function make_db( $dir, $name = 'site.db' )
{
    $path = $dir . '/' . $name;
    $db = new SQLite3( $path );
    $db->exec( 'PRAGMA journal_mode = wal' );
    $db->exec( 'CREATE TABLE IF NOT EXISTS pub (id INTEGER PRIMARY KEY, worker TEXT, seq INTEGER, seen INTEGER)' );
    $db->close();
    return $path;
}

function count_rows( $path, $where = '1' )
{
    $db = new SQLite3( $path );
    $db->busyTimeout( 10000 );
    $n = $db->querySingle( "SELECT COUNT(*) FROM pub WHERE $where" );
    $db->close();
    return (int)$n;
}

/** Starts helpers/holder.php holding the turn on $path; returns the child once it holds. */
function start_holder( $path, $mode = 'queue' )
{
    $child = new Child( php_cmd( __DIR__ . '/helpers/holder.php', array( $path, $mode ) ) );
    $line = $child->line();
    check( strpos( $line, 'held ' ) === 0, "holder did not report holding: $line" );
    return $child;
}

/** Lets a holder go and waits for it. */
function release_holder( Child $holder )
{
    $holder->send( "release\n" );
    $code = $holder->wait();
    check( $code === 0, "holder exited with $code: {$holder->out} {$holder->err}" );
}

/** How long another process waits to begin a queued transaction on $path (seconds), or fails. */
function probe_begin( $path, $wait = 2.0 )
{
    $child = new Child( php_cmd( __DIR__ . '/helpers/probe.php', array( $path, $wait ) ) );
    $child->wait();
    $result = json_decode( trim( $child->out ), true );
    check( is_array( $result ), "probe said: {$child->out} {$child->err}" );
    return $result;
}

/**
 * How generously a measured wait may run past its limit on a loaded machine
 * (seconds): a wait that gives up at its limit is noticed late when the
 * machine is busy, and its message says how long it really waited.
 */
const WAIT_SLACK = 2.0;

/**
 * Whether $actual reads $expected, with each "waited N.N s" of $expected
 * standing for the wait the message measured: any N'.N' from N.N (a wait
 * never gives up before its limit) to N.N + WAIT_SLACK, and every other
 * character exactly as written. $whole: the text is the message itself;
 * otherwise it contains the message (a log file). Returns null when it
 * does, or what is wrong.
 */
function busy_mismatch( $expected, $actual, $whole = true )
{
    $parts = preg_split( '/waited (\d+\.\d) s/', $expected, -1, PREG_SPLIT_DELIM_CAPTURE );
    $pattern = '';
    $limits = array();
    foreach ( $parts as $i => $part )
    {
        if ( $i % 2 === 1 )
        {
            $limits[] = (float)$part;
            $pattern .= 'waited (\d+\.\d) s';
        }
        else
        {
            $pattern .= preg_quote( $part, '/' );
        }
    }
    $pattern = $whole ? "/^$pattern\$/D" : "/$pattern/";
    if ( preg_match_all( $pattern, $actual, $found, PREG_SET_ORDER ) === 0 )
    {
        return ( $whole ? 'the text is not ' : 'the text does not contain ' ) . var_export( $expected, true )
             . ' (with any measured wait): ' . var_export( $actual, true );
    }
    $wrong = array();
    foreach ( $found as $match )
    {
        $bad = array();
        foreach ( $limits as $j => $limit )
        {
            $measured = (float)$match[$j + 1];
            if ( $measured < $limit - 1e-9 || $measured > $limit + WAIT_SLACK + 1e-9 )
            {
                $bad[] = "waited $measured s, outside [$limit, " . ( $limit + WAIT_SLACK ) . '] s: ' . $match[0];
            }
        }
        if ( !$bad )
        {
            return null;
        }
        $wrong = array_merge( $wrong, $bad );
    }
    return implode( '; ', $wrong );
}

/** Fails unless $actual is the busy message $expected with a measured wait in bounds (busy_mismatch()). */
function check_busy( $expected, $actual, $what )
{
    $wrong = busy_mismatch( $expected, $actual, true );
    check( $wrong === null, "$what: $wrong" );
}

/** Fails unless $text (a log) contains the busy message $expected with a measured wait in bounds. */
function check_busy_in( $expected, $text, $what )
{
    $wrong = busy_mismatch( $expected, $text, false );
    check( $wrong === null, "$what: $wrong" );
}

/** Fails unless a wait that ran out took from $limit to $limit + WAIT_SLACK seconds. */
function check_wait( $seconds, $limit, $what )
{
    check( $seconds >= $limit - 1e-6 && $seconds <= $limit + WAIT_SLACK, "$what: $seconds s, outside [$limit, " . ( $limit + WAIT_SLACK ) . '] s' );
}

/**
 * What another process (plain PHP, without the extension) finds on the
 * queue's own lock file `<db>.writer-lock`: "held" when its
 * flock(LOCK_EX|LOCK_NB) fails, "free" when it succeeds. This looks at the
 * queue itself, not at SQLite's locks.
 */
function lock_probe( $path )
{
    $child = new Child( php_cmd( __DIR__ . '/helpers/lock_probe.php', array( $path . '.writer-lock' ), false ) );
    $code = $child->wait();
    $said = trim( $child->out );
    check( $code === 0 && ( $said === 'held' || $said === 'free' ), "the lock probe exited with $code: {$child->out} {$child->err}" );
    return $said;
}

/** Fails unless another process finds the queue's lock file $state ("held" or "free"). */
function check_lock( $path, $state, $when )
{
    $found = lock_probe( $path );
    check( $found === $state, "another process found the writer lock $found $when (flock(LOCK_EX|LOCK_NB) on $path.writer-lock)" );
}

/**
 * For a .phpt's expected output: $expected when $actual is that busy
 * message with a measured wait in bounds (busy_mismatch()), else $actual
 * followed by what is wrong.
 */
function busy_as_expected( $expected, $actual )
{
    $wrong = busy_mismatch( $expected, $actual, true );
    return $wrong === null ? $expected : "$actual [$wrong]";
}
