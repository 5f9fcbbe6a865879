--TEST--
PHP's run-tests.php run directly on these tests (no run.sh, no WL_EXT or WL_ROOT) finds the extension it was given with -d extension=, and without one says that the extension is missing
--EXTENSIONS--
sqlite3
writerlock
--FILE--
<?php
require __DIR__ . '/lib.php';
$runTests = ini_get( 'extension_dir' ) . '/build/run-tests.php';
check( is_file( $runTests ), "no $runTests (php8.2-dev)" );
// A copy of two tests in a tree of their own (run-tests.php writes its files next to the tests).
$root = tmpdir( 'wl-runtests' );
mkdir( "$root/php-ext/tests", 0777, true );
copy( wl_root() . '/Cargo.toml', "$root/Cargo.toml" );
foreach ( array( 'lib.php', 'api.phpt', 'begin_messages.phpt' ) as $file )
{
    copy( __DIR__ . "/$file", "$root/php-ext/tests/$file" );
}
$env = array();
foreach ( getenv() as $name => $value )
{
    if ( strpos( $name, 'WL_' ) !== 0 && strpos( $name, 'TEST_PHP' ) !== 0 )
    {
        $env[$name] = $value;
    }
}
$env['NO_INTERACTION'] = '1';
foreach ( array( 'with -d extension=' => array( '-d', 'extension=' . ext_path() ), 'without it' => array() ) as $how => $ini )
{
    echo "-- $how\n";
    $child = new Child( array_merge( array( PHP_BINARY, $runTests, '-q', '--no-progress', '-p', PHP_BINARY ), $ini,
                                     array( "$root/php-ext/tests/api.phpt", "$root/php-ext/tests/begin_messages.phpt" ) ), $root, $env );
    $child->wait();
    foreach ( explode( "\n", $child->out ) as $line )
    {
        $line = preg_replace( '/\e\[[0-9;]*m/', '', $line );
        if ( preg_match( '/^(PASS|FAIL|SKIP|BORK)\s.*\[(.*?)\](.*)$/', $line, $m ) )
        {
            echo $m[1], ' ', basename( $m[2] ), rtrim( $m[3] ), "\n";
        }
    }
}
?>
--EXPECT--
-- with -d extension=
PASS api.phpt
PASS begin_messages.phpt
-- without it
SKIP api.phpt reason: Required extension missing: writerlock
SKIP begin_messages.phpt reason: Required extension missing: writerlock
