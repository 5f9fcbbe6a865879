<?php
// php-ext/stubs/writerlock.stubs.php against the loaded extension: the file
// is what php-ext/stubs/generate.php makes from the extension's reflection
// (the drift check), and, read in a PHP process without the extension, it
// declares the same classes, parents, methods, parameter names, types and
// defaults, return types. php-ext/stubs/composer.json installs it.
require __DIR__ . '/lib.php';

function describe( $source, $withExtension )
{
    $child = new Child( php_cmd( __DIR__ . '/helpers/reflect.php', array( $source ), $withExtension ) );
    $child->wait();
    $json = json_decode( $child->out, true );
    check( is_array( $json ), "reflection of $source failed: {$child->out} {$child->err}" );
    return $json;
}

function diff( $a, $b, $path = '' )
{
    $lines = array();
    foreach ( array_unique( array_merge( array_keys( (array)$a ), array_keys( (array)$b ) ) ) as $key )
    {
        $here = $path === '' ? (string)$key : "$path.$key";
        $left = is_array( $a ) && array_key_exists( $key, $a ) ? $a[$key] : '(absent)';
        $right = is_array( $b ) && array_key_exists( $key, $b ) ? $b[$key] : '(absent)';
        if ( is_array( $left ) && is_array( $right ) )
        {
            $lines = array_merge( $lines, diff( $left, $right, $here ) );
        }
        elseif ( $left !== $right )
        {
            $lines[] = "$here: extension " . json_encode( $left ) . ', stubs ' . json_encode( $right );
        }
    }
    return $lines;
}

$stubs = dirname( __DIR__ ) . '/stubs/writerlock.stubs.php';

t( 'the stub file parses', function () use ( $stubs ) {
    exec( escapeshellarg( PHP_BINARY ) . ' -l ' . escapeshellarg( $stubs ), $out, $rc );
    check_same( 0, $rc, 'php -l ' . $stubs );
} );

t( 'the committed stubs are what generate.php makes from the extension (regenerate on drift)', function () {
    $child = new Child( php_cmd( dirname( __DIR__ ) . '/stubs/generate.php', array( '--check' ) ) );
    $code = $child->wait();
    check_same( 0, $code, "generate.php --check: {$child->out} {$child->err}" );
} );

t( 'composer.json installs the stubs for IDEs and PHPStan', function () {
    $dir = dirname( __DIR__ ) . '/stubs';
    $json = json_decode( file_get_contents( "$dir/composer.json" ), true );
    check( is_array( $json ), 'composer.json is not valid JSON' );
    check_same( 'writerlock/writerlock-stubs', $json['name'], 'package name' );
    check( isset( $json['description'], $json['license'], $json['require']['php'] ), 'composer.json lacks description, license or require.php' );
    foreach ( $json['extra']['phpstan']['includes'] as $neon )
    {
        check( is_file( "$dir/$neon" ), "PHPStan include $neon is missing" );
        check( strpos( file_get_contents( "$dir/$neon" ), 'writerlock.stubs.php' ) !== false, "$neon does not name the stub file" );
    }
} );

t( 'the stubs match the extension\'s reflection', function () use ( $stubs ) {
    $ext = describe( 'ext', true );
    $stub = describe( $stubs, false );
    foreach ( $ext as $class => $desc )
    {
        check( $desc !== 'missing', "the extension has no $class" );
    }
    check( isset( $ext['WriterLock\\Queue']['methods']['begin']['params'][2]['default'] ), 'the extension reports no default for begin($setting)' );
    $differences = diff( $ext, $stub );
    check( $differences === array(), "stubs and extension differ:\n" . implode( "\n", $differences ) );
} );

t( 'the issue\'s signatures, read from the extension', function () {
    $q = new ReflectionClass( 'WriterLock\\Queue' );
    $sig = function ( $method ) use ( $q ) {
        $m = $q->getMethod( $method );
        $parts = array();
        foreach ( $m->getParameters() as $p )
        {
            $parts[] = ( $p->getType() ? $p->getType() . ' ' : '' ) . '$' . $p->getName()
                     . ( $p->isDefaultValueAvailable() ? ' = ' . var_export( $p->getDefaultValue(), true ) : '' );
        }
        return $method . '(' . implode( ', ', $parts ) . ')' . ( $m->getReturnType() ? ': ' . $m->getReturnType() : '' );
    };
    check_same( '__construct(string $databasePath)', $sig( '__construct' ), '__construct' );
    check_same( "begin(SQLite3|PDO \$db, float \$waitSeconds = 25.0, string \$setting = 'the waitSeconds argument of WriterLock\\\\Queue::begin()'): void", $sig( 'begin' ), 'begin' );
    check_same( "transaction(SQLite3|PDO \$db, callable \$fn, float \$waitSeconds = 25.0, string \$setting = 'the waitSeconds argument of WriterLock\\\\Queue::transaction()'): mixed", $sig( 'transaction' ), 'transaction' );
    check_same( 'forConnection(SQLite3|PDO $db): WriterLock\\Queue', $sig( 'forConnection' ), 'forConnection' );
    check( $q->getMethod( 'forConnection' )->isStatic(), 'forConnection() is not static' );
    check_same( 'commit(SQLite3|PDO $db): bool', $sig( 'commit' ), 'commit' );
    check_same( 'rollback(SQLite3|PDO $db): bool', $sig( 'rollback' ), 'rollback' );
    check_same( "exec(SQLite3|PDO \$db, string \$sql, float \$waitSeconds = 5.0, string \$setting = 'the waitSeconds argument of WriterLock\\\\Queue::exec()'): void", $sig( 'exec' ), 'exec' );
    check_same( "acquire(float \$waitSeconds = 25.0, string \$setting = 'the waitSeconds argument of WriterLock\\\\Queue::acquire()'): float", $sig( 'acquire' ), 'acquire' );
    check_same( 'holding(): bool', $sig( 'holding' ), 'holding' );
    check_same( 'lastWait(): float', $sig( 'lastWait' ), 'lastWait' );
    $b = new ReflectionClass( 'WriterLock\\BusyException' );
    foreach ( array( 'waited' => 'float', 'limit' => 'float', 'setting' => 'string', 'holderPid' => '?int' ) as $m => $type )
    {
        check_same( $type, (string)$b->getMethod( $m )->getReturnType(), "BusyException::$m() return type" );
    }
} );
