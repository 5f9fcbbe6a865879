--TEST--
The PHP examples of README.md, php-ext/README.md and docs/php.md run verbatim and do what they say, twice in a row
--EXTENSIONS--
pcntl
pdo_sqlite
sqlite3
writerlock
--FILE--
<?php
require __DIR__ . '/lib.php';

/** The first ```php block after $heading in $file. */
function example( $file, $heading )
{
    $text = file_get_contents( wl_root() . "/$file" );
    $at = strpos( $text, "\n$heading\n" );
    check( $at !== false, "$file has no heading $heading" );
    check( preg_match( '/```php\n(.*?)```/s', $text, $m, 0, $at ) === 1, "$file has no php block after $heading" );
    return $m[1];
}

foreach ( array( array( 'README.md', '## PHP' ), array( 'php-ext/README.md', '## API' ), array( 'docs/php.md', '## Signals' ) ) as list( $file, $heading ) )
{
    echo "-- $file\n";
    $dir = tmpdir();
    file_put_contents( "$dir/example.php", example( $file, $heading ) );
    for ( $run = 1; $run <= 2; $run++ )
    {
        $child = new Child( php_cmd( "$dir/example.php", array(), true ), $dir );
        $child->wait();
        echo $child->out, $child->err === '' ? '' : "stderr: {$child->err}\n";
    }
}
?>
--EXPECT--
-- README.md
job 1 done
job 2 done
-- php-ext/README.md
1 link(s) saved
1 link(s) saved
-- docs/php.md
committed
committed
