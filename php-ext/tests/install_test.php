<?php
// php-ext/install.sh, the documented install command, run from a fresh
// clone of this repository (its committed HEAD) into a PHP extension
// directory that is not PHP's default, with CARGO_TARGET_DIR pointing
// somewhere else than target/: a dry run changes nothing, the install
// writes the absolute path into the ini file, the installed library is
// stripped and loads (the printed next step runs without "already loaded"),
// and --remove takes it away again. The build profile is the tests'
// (WL_PROFILE).
require __DIR__ . '/lib.php';

$root = wl_root();
$dir = tmpdir( 'wl-install' );
// The clone builds into a build directory of its own, kept at a fixed place
// under target/ so its registry crates are compiled once, not every run.
// Never target/ itself: the clone's workspace crates get the same artifact
// names there as the working tree's, so cargo would afterwards take the
// clone's build (its committed HEAD) for an up-to-date build of the working
// tree and no longer rebuild changed sources for any later test.
$cloneTarget = dirname( dirname( ext_path() ) ) . '/install-test-target';
if ( !is_dir( $cloneTarget ) )
{
    mkdir( $cloneTarget );
}
// Reached through another path: whether install.sh honours CARGO_TARGET_DIR shows.
symlink( $cloneTarget, "$dir/elsewhere-target" );
$env = array( 'CARGO_TARGET_DIR' => "$dir/elsewhere-target", 'PROFILE' => getenv( 'WL_PROFILE' ) ?: 'release',
              'EXT_DIR' => "$dir/php/extensions", 'INI_DIR' => "$dir/php/conf.d" );
// At a fixed place under the build directory: the same path each run, so
// cargo builds the clone's crates into the same artifacts of its build
// directory instead of adding new ones every run.
$clone = dirname( dirname( ext_path() ) ) . '/install-test-clone';
exec( 'rm -rf ' . escapeshellarg( $clone ) . ' && git clone --quiet ' . escapeshellarg( $root ) . ' ' . escapeshellarg( $clone ) . ' 2>&1', $out, $rc );
if ( $rc !== 0 )
{
    echo "not ok - git clone of $root failed (the install is tested from a fresh clone): " . implode( ' ', $out ) . "\n";
    exit( 1 );
}
$GLOBALS['clone'] = $clone;

function install( array $args, array $env )
{
    $child = new Child( array_merge( array( $GLOBALS['clone'] . '/php-ext/install.sh' ), $args ), sys_get_temp_dir(), $env + getenv() );
    $code = $child->wait();
    check_same( 0, $code, 'install.sh ' . implode( ' ', $args ) . " exited with $code: {$child->out} {$child->err}" );
    return $child->out;
}

function tree( $dir )
{
    exec( 'find ' . escapeshellarg( $dir ) . ' -print | sort', $out );
    return $out;
}

t( 'a dry run names every step and changes nothing', function () use ( $dir, $env ) {
    $before = tree( $dir );
    $out = install( array( '--dry-run' ), $env );
    check_same( $before, tree( $dir ), 'files after the dry run' );
    foreach ( array( "would run: env -C {$GLOBALS['clone']} cargo build --profile", "would run: install -m 0644 $dir/elsewhere-target/", "$dir/php/extensions/writerlock.so",
                     'would run: strip', "would write $dir/php/conf.d/writerlock.ini: extension=$dir/php/extensions/writerlock.so" ) as $step )
    {
        check( strpos( $out, $step ) !== false, "the dry run does not say: $step\n$out" );
    }
} );

t( 'a fresh clone installs a stripped build from CARGO_TARGET_DIR into a non-default extension directory, by absolute path', function () use ( $dir, $env ) {
    $out = install( array(), $env );
    $so = "$dir/php/extensions/writerlock.so";
    check( is_file( $so ), "no $so:\n$out" );
    check_same( "extension=$so", trim( preg_replace( '/^;.*$/m', '', file_get_contents( "$dir/php/conf.d/writerlock.ini" ) ) ), 'the ini file' );
    exec( 'readelf -S ' . escapeshellarg( $so ), $sections, $rc );
    check_same( 0, $rc, 'readelf -S' );
    check( !preg_grep( '/\.debug_/', $sections ), 'the installed library still has debug sections' );
    check( filesize( $so ) * 4 < filesize( ext_path() ), sprintf( 'installed %d bytes, built %d: not stripped', filesize( $so ), filesize( ext_path() ) ) );
    printf( "# installed %.1f MB (the build with debug info: %.1f MB)\n", filesize( $so ) / 1e6, filesize( ext_path() ) / 1e6 );
} );

t( 'the next step the install prints loads the extension once, without "already loaded"', function () use ( $dir, $env ) {
    $out = install( array(), $env );
    check( preg_match( '/check it with: (PHP_INI_SCAN_DIR=(\S+) )?php --ri writerlock$/m', $out, $m ) === 1, "no next step printed:\n$out" );
    $child = new Child( array( PHP_BINARY, '--ri', 'writerlock' ), null, array( 'PHP_INI_SCAN_DIR' => $m[2] ) + getenv() );
    $child->wait();
    check( strpos( $child->out, 'writerlock => enabled' ) !== false, "php --ri writerlock: {$child->out} {$child->err}" );
    check( stripos( $child->out . $child->err, 'already loaded' ) === false, "php --ri writerlock: {$child->out} {$child->err}" );
    $child = new Child( array( PHP_BINARY, '-r', '$q = new WriterLock\Queue(":memory:"); $db = new PDO("sqlite::memory:"); $q->begin($db); var_dump($q->commit($db));' ),
                        null, array( 'PHP_INI_SCAN_DIR' => $m[2] ) + getenv() );
    $child->wait();
    check_same( "bool(true)\n", $child->out . $child->err, 'a queued transaction with the installed extension' );
} );

t( '--remove takes it away (and --remove --dry-run does not)', function () use ( $dir, $env ) {
    $before = tree( $dir );
    $out = install( array( '--remove', '--dry-run' ), $env );
    check_same( $before, tree( $dir ), 'files after the dry run' );
    check( strpos( $out, "would run: rm -f $dir/php/extensions/writerlock.so" ) !== false, "dry run of --remove:\n$out" );
    install( array( '--remove' ), $env );
    check( !file_exists( "$dir/php/extensions/writerlock.so" ) && !file_exists( "$dir/php/conf.d/writerlock.ini" ), 'files left: ' . implode( ' ', tree( "$dir/php" ) ) );
} );

t( '--lib installs a prebuilt library without cargo or Rust on the PATH, and it runs a queued transaction; a file that is no PHP extension is refused', function () use ( $dir, $env ) {
    $prebuilt = "$dir/prebuilt/libwriterlock_php.so";
    mkdir( dirname( $prebuilt ) );
    copy( ext_path(), $prebuilt );
    // No cargo anywhere: not on the PATH, and CARGO names nothing.
    $noRust = array( 'PATH' => '/usr/local/bin:/usr/bin:/bin', 'CARGO' => "$dir/no-cargo-here",
                     'EXT_DIR' => "$dir/php2/extensions", 'INI_DIR' => "$dir/php2/conf.d" ) + $env;
    $out = install( array( '--lib', $prebuilt ), $noRust );
    check( strpos( $out, 'cargo' ) === false, "the install mentions cargo:\n$out" );
    $so = "$dir/php2/extensions/writerlock.so";
    check( is_file( $so ), "no $so:\n$out" );
    check( filesize( $so ) * 4 < filesize( $prebuilt ), sprintf( 'installed %d bytes from %d: not stripped', filesize( $so ), filesize( $prebuilt ) ) );
    check_same( "extension=$so", trim( preg_replace( '/^;.*$/m', '', file_get_contents( "$dir/php2/conf.d/writerlock.ini" ) ) ), 'the ini file' );
    $child = new Child( array( PHP_BINARY, '-r', '$q = new WriterLock\Queue(":memory:"); $db = new SQLite3(":memory:"); $q->begin($db); var_dump($q->commit($db));' ),
                        null, array( 'PHP_INI_SCAN_DIR' => ":$dir/php2/conf.d" ) + getenv() );
    $child->wait();
    check_same( "bool(true)\n", $child->out . $child->err, 'a queued transaction with the installed library' );
    file_put_contents( "$dir/prebuilt/notes.txt", "not a library\n" );
    $child = new Child( array( $GLOBALS['clone'] . '/php-ext/install.sh', '--lib', "$dir/prebuilt/notes.txt" ), null, $noRust + getenv() );
    check_same( 1, $child->wait(), 'exit status for a text file' );
    check_same( "install.sh: --lib $dir/prebuilt/notes.txt is not a shared library; give the path of a built writerlock.so\n", $child->err, 'stderr' );
    check( !file_exists( "$dir/php2/extensions/notes.txt" ), 'the text file was installed' );
} );

t( 'a bad option is refused with what to do', function () use ( $env ) {
    $child = new Child( array( $GLOBALS['clone'] . '/php-ext/install.sh', '--frobnicate' ), null, $env + getenv() );
    check_same( 2, $child->wait(), 'exit status' );
    check_same( "install.sh: unknown option --frobnicate (see --help)\n", $child->err, 'stderr' );
} );
